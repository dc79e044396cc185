"""Reading a tar archive someone uploaded without trusting what it says of itself.

tarfile's own decompression ("r:*", "r|*") reads an extended header (pax, a GNU long name) whole into memory,
however long the header says it is, and getmembers() unpacks every byte of the archive before a caller can look
at the first member's size. Here the archive is decompressed by us (gzip, bzip2, xz, or none: told by its first
bytes) through a reader that refuses any one read longer than a header may be (MAX_HEADER_BYTES) and any read or
seek past a byte budget, so that a few kilobytes which unpack to gigabytes stop at the budget, in constant memory.
Torch-free: the API reads an upload's first member with it too.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import tarfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, BinaryIO, cast

MAX_HEADER_BYTES = 1 << 20  # one read tarfile makes for a header; a real pax header or long name is < 64 KiB
HEADER_BYTES_PER_MEMBER = 8 * tarfile.BLOCKSIZE  # a member's headers and padding: what a real archive spends
END_BYTES = 2 * tarfile.RECORDSIZE  # the end-of-archive blocks and the record's padding
GZIP_MAGIC, BZIP2_MAGIC, XZ_MAGIC = b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"


class ArchiveError(ValueError):
    """The archive cannot be imported; the message says why."""


class BoundedReader:
    """A decompressed archive as tarfile reads it (read, seek, tell), refusing a read of more than MAX_HEADER_BYTES
    at once (tarfile reads members' data in 16 KiB pieces; only a header is read whole) and any position past
    `limit` bytes."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self.raw, self.limit = raw, limit

    def _check(self, position: int) -> None:
        if position > self.limit:
            raise ArchiveError(f"the archive unpacks to more than {self.limit} bytes, headers included")

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > MAX_HEADER_BYTES:
            raise ArchiveError(
                f"the archive holds a header of {size} bytes at byte {self.raw.tell()}: more than the "
                f"{MAX_HEADER_BYTES} a header may hold"
            )
        self._check(self.raw.tell() + size)
        return self.raw.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence != 0:
            raise ArchiveError("the archive was read out of order")  # tarfile seeks to absolute offsets only
        self._check(offset)
        return self.raw.seek(offset)

    def tell(self) -> int:
        return self.raw.tell()

    def seekable(self) -> bool:
        return True


def _decompressed(f: IO[bytes]) -> IO[bytes]:
    """The file's bytes, decompressed when its first bytes say gzip, bzip2 or xz; tarfile's "r:*" accepts the same."""
    head = f.read(len(XZ_MAGIC))
    f.seek(0)
    if head.startswith(GZIP_MAGIC):
        return cast(IO[bytes], gzip.GzipFile(fileobj=f, mode="rb"))
    if head.startswith(BZIP2_MAGIC):
        return bz2.BZ2File(f)
    if head.startswith(XZ_MAGIC):
        return lzma.LZMAFile(f)
    return f


def stream_limit(member_bytes: int, members: int) -> int:
    """The decompressed bytes an archive of `members` members holding `member_bytes` in all may take."""
    return member_bytes + members * HEADER_BYTES_PER_MEMBER + MAX_HEADER_BYTES + END_BYTES


@contextmanager
def open_tar(archive: str | Path | BinaryIO, limit: int) -> Iterator[tarfile.TarFile]:
    """The archive (a path, or a binary file object, left open and not rewound), read through a BoundedReader of
    `limit` decompressed bytes: iterate it with next() and extract each member as it comes, never getmembers().
    Raises ArchiveError at the bound, or tarfile's, the decompressor's or the file's own errors."""
    with ExitStack() as stack:
        f = stack.enter_context(open(archive, "rb")) if isinstance(archive, str | Path) else archive
        unpacked = _decompressed(f)
        if unpacked is not f:  # closing a decompressor leaves the file it was given open
            stack.callback(unpacked.close)
        reader: IO[bytes] = BoundedReader(unpacked, limit)  # type: ignore[assignment]  # what tarfile calls of one
        yield stack.enter_context(tarfile.open(fileobj=reader, mode="r:"))
