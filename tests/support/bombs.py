"""Uploads built to exhaust whoever unpacks them: small on disk, huge once decompressed or once believed."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

MB = 1024 * 1024
_ZEROS_MEMBER_MB = 16


def zeros_gz(unpacked_mb: int) -> bytes:
    """A gzip file of `unpacked_mb` MiB of zero bytes and no newline (about 1 KB on disk per MiB): one gzip member of
    16 MiB of zeros, repeated; a gzip reader reads concatenated members as one stream."""
    member = gzip.compress(b"\0" * (_ZEROS_MEMBER_MB * MB), compresslevel=9)
    return member * max(1, unpacked_mb // _ZEROS_MEMBER_MB)


def pax_header_bomb(header_mb: int) -> bytes:
    """A .tar.gz whose first member is a pax extended header that says it is `header_mb` MiB long (zeros), then a
    small file: tarfile reads such a header whole into memory before it returns a member."""
    info = tarfile.TarInfo("m/PaxHeaders/readme.txt")
    info.type, info.size = tarfile.XHDTYPE, header_mb * MB
    head = gzip.compress(info.tobuf(tarfile.USTAR_FORMAT))
    readme = io.BytesIO()
    with tarfile.open(fileobj=readme, mode="w") as tar:
        small = tarfile.TarInfo("m/readme.txt")
        small.size = 2
        tar.addfile(small, io.BytesIO(b"hi"))
    return head + zeros_gz(header_mb) + gzip.compress(readme.getvalue())


def many_members_tar_gz(count: int) -> bytes:
    """A .tar.gz of `count` empty files in one folder (a few bytes each once compressed)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for i in range(count):
            tar.addfile(tarfile.TarInfo(f"m/f{i}.txt"), io.BytesIO(b""))
    return buffer.getvalue()


def forged_native(folder: Path, out: Path, **model: int) -> Path:
    """A native export's unpacked folder with config.json's model fields set to `model` and the manifest made to
    agree (hashes cannot tell a forged file), packed again as out (.tar.gz, one top folder named like out's stem)."""
    config = json.loads((folder / "config.json").read_text())
    config["model"].update(model)
    data = json.dumps(config).encode()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["config.json"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    name = out.name.removesuffix(".tar.gz")
    with tarfile.open(out, "w:gz") as tar:
        for path in sorted(folder.iterdir()):
            content = {"config.json": data, "manifest.json": json.dumps(manifest).encode()}.get(path.name)
            content = path.read_bytes() if content is None else content
            info = tarfile.TarInfo(f"{name}/{path.name}")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return out
