"""How bench/quality.py schedules its two sides: one after the other by default, both at once with --concurrent
(each on its share of the threads). The training itself is measured by the benchmark, not here."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from bench import quality


def meeting(barrier: threading.Barrier, log: list[str], name: str):
    def run() -> dict:
        log.append(f"{name} start")
        barrier.wait()  # returns only once the other side is running too
        log.append(f"{name} end")
        return {"side": name}

    return run


def test_concurrent_sides_run_at_the_same_time() -> None:
    barrier, log = threading.Barrier(2, timeout=10), []
    sides = {"ours": meeting(barrier, log, "ours"), "peer": meeting(barrier, log, "peer")}
    results = list(quality.run_sides(sides, concurrent=True))
    assert results == [("ours", {"side": "ours"}), ("peer", {"side": "peer"})]  # the order given, not of landing
    assert sorted(log[:2]) == ["ours start", "peer start"]


def test_sequential_sides_do_not_overlap() -> None:
    barrier, log = threading.Barrier(2, timeout=0.5), []
    sides = {"ours": meeting(barrier, log, "ours"), "peer": meeting(barrier, log, "peer")}
    with pytest.raises(threading.BrokenBarrierError):  # ours waits alone: peer has not started
        list(quality.run_sides(sides, concurrent=False))
    assert log == ["ours start"]


def test_a_side_runs_on_its_share_of_threads() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # this thread's; the side's thread must see its own 1
    try:
        with ThreadPoolExecutor(1) as pool:
            seen = pool.submit(quality.on_threads(1, lambda: {"threads": torch.get_num_threads()})).result()
        assert seen == {"threads": 1}
    finally:
        torch.set_num_threads(before)


def test_concurrent_needs_the_service(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        quality.main(["--concurrent", "--through", "function", "--minutes", "0.01"])
    assert exit_info.value.code == 2
    assert "--concurrent needs --through service" in capsys.readouterr().err


def test_a_cut_corpus_keeps_a_sample_of_the_training_pairs_and_every_other_part(tmp_path):
    from bench.corpus import cut as cut_corpus

    corpus = tmp_path / "en-fr"
    corpus.mkdir()
    (corpus / "train.jsonl").write_text("".join(f'{{"n": {i}}}\n' for i in range(10)))
    for part in ("valid.jsonl", "test.jsonl"):
        (corpus / part).write_text(f'{{"part": "{part}"}}\n')
    cut = cut_corpus(corpus, 4)
    kept = [json.loads(line)["n"] for line in (cut / "train.jsonl").read_text().splitlines()]
    assert len(kept) == 4 and kept == sorted(set(kept)) and set(kept) <= set(range(10))
    assert kept == [json.loads(line)["n"] for line in (cut_corpus(corpus, 4) / "train.jsonl").read_text().splitlines()]
    for part in ("valid.jsonl", "test.jsonl"):
        assert (cut / part).read_text() == (corpus / part).read_text()
    with pytest.raises(SystemExit, match="11: the corpus has 10"):
        cut_corpus(corpus, 11)


def test_the_peer_takes_marian_config_fields_and_settings_parse_as_json() -> None:
    from bench.quality_peer import peer

    assert quality.parse_settings(["decoder_layers=1", "activation_function=gelu", 'x={"a": 2}']) == {
        "decoder_layers": 1,
        "activation_function": "gelu",
        "x": {"a": 2},
    }
    rows = [("one two three", "un deux trois"), ("four five", "quatre cinq")] * 20
    recipe = {"vocab_size": 60, "max_tokens_per_batch": 64, "warmup_steps": 4}
    sizes = [
        peer(rows, ["one two"], recipe, seed=0, minutes=0.001, config_overrides=overrides)[1]["parameters"]
        for overrides in (None, {"decoder_layers": 1})
    ]
    decoder_layer = 4 * 256 * 256 * 2 + 2 * 256 * 1024  # self and cross attention's projections, the FFN (weights)
    assert sizes[0] - sizes[1] > 2 * decoder_layer  # two decoder layers fewer


def test_a_jobs_validation_curves_leave_the_test_scores_alone():
    """The job's series "bleu" (its validation BLEU) once overwrote the run's test BLEU with a list."""
    series = {
        "valid_loss": {"steps": [200, 400], "values": [3.1, 2.7]},
        "bleu": {"steps": [200, 400], "values": [9, 14]},
    }
    found = quality.curves(series)
    assert found == {"valid_loss": [[200, 3.1], [400, 2.7]], "valid_bleu": [[200, 9], [400, 14]]}
    assert set(found).isdisjoint(quality.score(["a b"], ["a b"]))
