"""How a data-parallel job's processes meet (worker/training/rendezvous.py, model/train/distributed.py): nothing a
stranger writes to the rendezvous is unpickled, and the ranks' collectives carry no pickles.

PyTorch's elastic rendezvous keeps its state as a pickle in a TCPStore that listens on every interface without
authentication. The tests plant a crafted pickle (one that creates a file when loaded) in a real TCPStore on
loopback, as anyone who reaches the port could, and run the real rendezvous handler against it. That one host's
groups open no listener at all is shown on a real job (tests/e2e/test_ddp_job.py)."""

from __future__ import annotations

import base64
import pickle
import threading
from datetime import timedelta
from pathlib import Path

import pytest
import torch.distributed as dist
from torch.distributed.elastic.rendezvous import RendezvousParameters, RendezvousStateError
from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler

from bench.harness.stack import free_port
from model.train.distributed import destroy_process_group, file_store, init_process_group
from worker.training import rendezvous


class _Planted:
    """A pickle that, once loaded, creates `marker`: what an attacker would make run a command instead."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _params(backend: str, port: int, key_file: Path | None, *, host: bool, nodes: int = 1) -> RendezvousParameters:
    extra = {"key_file": str(key_file)} if key_file is not None else {}
    return RendezvousParameters(
        backend=backend,
        endpoint=f"127.0.0.1:{port}",
        run_id="job-1-1",
        min_nodes=nodes,
        max_nodes=nodes,
        local_addr="127.0.0.1",
        is_host=host,
        join_timeout=20,
        last_call_timeout=1,
        **extra,
    )


def _plant(port: int, marker: Path) -> None:
    """Connect to the rendezvous store as a client, as a stranger on the network could, and set its state."""
    client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10))
    client.set("torch.rendezvous.job-1-1", base64.b64encode(pickle.dumps(_Planted(marker))))


@pytest.fixture(autouse=True)
def _registered():
    rendezvous.register()


def test_pytorchs_own_rendezvous_runs_a_planted_pickle(tmp_path):
    """The threat, shown on PyTorch's c10d rendezvous as it comes: the planted state is unpickled (the marker file
    appears). If this ever fails, PyTorch stopped unpickling the state and the signing is belt and braces."""
    port, marker = free_port(), tmp_path / "ran"
    handler = get_rendezvous_handler(_params("c10d", port, None, host=True))
    _plant(port, marker)
    with pytest.raises(Exception):  # noqa: B017 - whatever follows the load, the load has happened
        handler.next_rendezvous()
    assert marker.exists()


def test_a_planted_pickle_is_refused_unread_by_the_signed_rendezvous(tmp_path):
    """Fault: the state is unpickled before anything checks who wrote it. Pass: next_rendezvous raises
    RendezvousStateError naming the refusal, and the planted pickle never ran (no marker file)."""
    port, marker = free_port(), tmp_path / "ran"
    handler = get_rendezvous_handler(_params(rendezvous.SIGNED, port, rendezvous.write_key(tmp_path), host=True))
    _plant(port, marker)
    with pytest.raises(RendezvousStateError, match="not signed with this attempt's key"):
        handler.next_rendezvous()
    assert not marker.exists()


def test_hosts_sharing_the_attempts_key_meet_and_a_host_with_another_key_is_refused(tmp_path):
    """Pass: two hosts with the attempt's key form a group of 2 (ranks 0 and 1) through the signed rendezvous on
    a real TCPStore; a third with another attempt's key, joining the same store, is refused."""
    port = free_port()
    key = rendezvous.write_key(tmp_path)
    (tmp_path / "other").mkdir()
    other = rendezvous.write_key(tmp_path / "other")
    host = get_rendezvous_handler(_params(rendezvous.SIGNED, port, key, host=True, nodes=2))
    guest = get_rendezvous_handler(_params(rendezvous.SIGNED, port, key, host=False, nodes=2))
    ranks: dict[str, int] = {}

    def join(name: str, handler) -> None:
        ranks[name] = handler.next_rendezvous().rank

    threads = [threading.Thread(target=join, args=(n, h)) for n, h in (("host", host), ("guest", guest))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(ranks.values()) == [0, 1], ranks
    stranger = get_rendezvous_handler(_params(rendezvous.SIGNED, port, other, host=False, nodes=2))
    with pytest.raises(RendezvousStateError, match="not signed with this attempt's key"):
        stranger.next_rendezvous()
    for handler in (host, guest):
        handler.shutdown()


def test_the_ranks_collectives_carry_json_not_pickles(tmp_path, monkeypatch):
    """Fault: broadcast or check_same use torch's object collectives, which unpickle what other ranks send.
    Pass: with the object collectives and torch's unpickler made to fail, a group (of one, on a file store)
    broadcasts a JSON value and checks that ranks agree."""

    def refuse(*args, **kwargs):
        raise AssertionError("a pickle went through the process group")

    monkeypatch.setattr(dist, "broadcast_object_list", refuse)
    monkeypatch.setattr(dist, "all_gather_object", refuse)
    monkeypatch.setattr(dist.distributed_c10d, "_unpickler", refuse)
    ctx = init_process_group(0, 1, "cpu", store=file_store(tmp_path / "store", 1), timeout=timedelta(seconds=30))
    try:
        value = {"checkpoint": "step-00000030", "ok": [1, 2.5, None]}
        assert ctx.broadcast(value) == value
        assert ctx.broadcast(None) is None
        ctx.check_same("settings", {"a": 1})
    finally:
        destroy_process_group()
