"""The CLI's dataset commands against the API in process (the data queue's work run here, as a worker would): upload
with languages, `dataset ID` with the report's summary, `filter-dataset` with what each rule removed."""

from __future__ import annotations

import json

from tests.api.test_cli import _key

ROWS = [(f"the cat number {i} sat on the mat", f"le chat numéro {i} était assis sur le tapis") for i in range(50)]


def test_upload_then_the_report_summary_then_a_filtered_dataset(cli, alice, tmp_path):
    from worker.data.filtering import make
    from worker.data.ingest import process

    path = tmp_path / "crawl.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in ROWS + ROWS[:4] + [("same words", "same words")]))
    key = _key(alice)
    code, out, err = cli(
        "upload", str(path), "--kind", "parallel", "--source-language", "en", "--target-language", "fr",
        "--no-wait", "--key", key,
    )  # fmt: skip
    assert code == 0, err
    dataset_id = out.strip()
    assert "still being processed" in err
    assert process(dataset_id) == "ready"
    code, out, _ = cli("dataset", dataset_id, "--key", key)
    assert code == 0
    assert out.splitlines()[0].endswith("ready, 55 rows, parallel tsv")
    assert any(
        line.split()[:2] == ["duplicate", "pairs"] and "4" in line.split() and "line 51" in line
        for line in out.splitlines()
    ), out
    assert any(line.strip().startswith("target copies source") and "line 55" in line for line in out.splitlines()), out
    code, out, _ = cli("dataset", dataset_id, "--json", "--key", key)
    assert json.loads(out)["report"]["problems"]["duplicates"]["count"] == 4

    code, out, err = cli("filter-dataset", dataset_id, "--deduplicate", "--drop-copies", "--no-wait", "--key", key)
    assert code == 0, err
    child = out.strip()
    assert make(child) == "ready"
    code, out, _ = cli("dataset", child, "--key", key)
    assert f"filtered from {dataset_id}: kept 50 of 55 (duplicates 4, copies 1)" in out
    code, _, err = cli("filter-dataset", dataset_id, "--key", key)
    assert code == 1 and "no rule is on" in err
