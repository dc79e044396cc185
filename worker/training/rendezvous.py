"""How a data-parallel job's processes meet, with nothing on the network that would run what a stranger sends.

PyTorch's elastic rendezvous keeps its state as a pickle in a store, and its TCPStore listens on every interface
without authentication: whoever reaches the port could plant a pickle that the agent then loads. So:

- **One host** (training.nodes = 1): the agent's rendezvous and the ranks' process group meet through files in the
  job's private folder (c10d's FileStore), and gloo and NCCL connect the ranks over loopback only. Nothing listens
  on a network address.
- **Several hosts**: the rendezvous is c10d's on a TCPStore, which must be on the workers' own network
  (docs/operations.md), and its state is signed: node 0 draws a key per attempt and leaves it beside the launch files
  in the artifact store, which only workers can read; every host's agent checks the signature before PyTorch
  unpickles the state, so a state written by anything else is refused (the group fails, nothing runs).

What the ranks exchange after that carries no pickles either (model/train/distributed.py).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from torch.distributed.elastic.rendezvous import (
    RendezvousHandler,
    RendezvousParameters,
    RendezvousStateError,
    rendezvous_handler_registry,
)
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import create_backend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import RendezvousBackend, Token, create_handler

KEY_FILE = "rendezvous.key"  # in the launch folder: node 0 writes it, the other hosts fetch it with the launch files
SIGNED = "c10d-signed"  # the rendezvous backend of groups of several hosts
LOOPBACK_ENV = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}  # one host: the ranks connect over loopback
MAC_BYTES = 32


def write_key(folder: Path) -> Path:
    """A new random key for one attempt's rendezvous, readable by this user only."""
    path = folder / KEY_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))
    return path


def read_key(path: Path) -> bytes:
    key = bytes.fromhex(path.read_text().strip())
    if len(key) < 16:
        raise ValueError(f"the rendezvous key in {path.name} is {len(key)} bytes: 16 or more are needed")
    return key


class SignedBackend(RendezvousBackend):
    """c10d's rendezvous backend, with every state it writes signed (HMAC-SHA256) and every state it reads checked
    before it goes on to be unpickled."""

    def __init__(self, inner: RendezvousBackend, key: bytes) -> None:
        self.inner, self.key = inner, key

    @property
    def name(self) -> str:
        return SIGNED

    def _sign(self, state: bytes) -> bytes:
        return hmac.new(self.key, state, hashlib.sha256).digest() + state

    def _open(self, signed: bytes) -> bytes:
        mac, state = signed[:MAC_BYTES], signed[MAC_BYTES:]
        if len(signed) < MAC_BYTES or not hmac.compare_digest(mac, hmac.new(self.key, state, hashlib.sha256).digest()):
            raise RendezvousStateError(
                "the rendezvous state is not signed with this attempt's key: something other than the job's hosts "
                "wrote to the rendezvous store, and the state was refused unread"
            )
        return state

    def get_state(self) -> tuple[bytes, Token] | None:
        found = self.inner.get_state()
        if found is None:
            return None
        signed, token = found
        return self._open(signed), token

    def set_state(self, state: bytes, token: Token | None = None) -> tuple[bytes, Token, bool] | None:
        written = self.inner.set_state(self._sign(state), token)
        if written is None:
            return None
        signed, new_token, ok = written
        return self._open(signed), new_token, ok


def _create_signed(params: RendezvousParameters) -> RendezvousHandler:
    key_file = params.get("key_file")
    if not key_file:
        raise ValueError(f"the {SIGNED} rendezvous needs key_file")
    backend, store = create_backend(params)
    return create_handler(store, SignedBackend(backend, read_key(Path(key_file))), params)


def register() -> None:
    """Make the signed backend known to PyTorch's launcher, in the agent's process (once is enough; again is fine)."""
    rendezvous_handler_registry.register(SIGNED, _create_signed)


def agent_rendezvous(nodes: int, endpoint: str, workdir: Path, launch: Path) -> tuple[str, str, dict[str, str]]:
    """(backend, endpoint, extra settings) of the agent's rendezvous: a file in the private workdir for one host,
    the signed c10d rendezvous at endpoint for several."""
    if nodes == 1:
        return "c10d", str(workdir / "rendezvous.store"), {"store_type": "file"}
    return SIGNED, endpoint, {"key_file": str(launch / KEY_FILE)}


def ranks_store_path(workdir: Path, restart: int) -> Path:
    """Where one host's ranks meet for their process group: a new file for each restart of the group."""
    return workdir / f"ranks-{restart}.store"
