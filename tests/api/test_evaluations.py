"""POST/GET /v1/models/{id}/evaluations checked before a worker is involved: ownership, the dataset's kind, the
limits; an accepted evaluation is queued and readable, its hypotheses 409 until it succeeds."""

from __future__ import annotations

import pytest

from tests.api.test_init_model import _model_row


def test_an_evaluation_is_queued_listed_and_read(client, alice, parallel_id):
    model = _model_row("alice")
    body = {"dataset_id": parallel_id, "beam_size": 2, "tokenize": "intl"}
    response = client.post(f"/v1/models/{model}/evaluations", json=body, headers=alice)
    assert response.status_code == 202, response.text
    evaluation = response.json()
    assert (evaluation["status"], evaluation["sentences"], evaluation["progress"]) == ("queued", 2, 0.0)
    assert evaluation["settings"] == {
        "beam_size": 2, "alpha": 0.6, "tokenize": "intl", "max_sentences": None, "backend": "auto"
    }  # fmt: skip
    assert evaluation["scores"] is None and evaluation["hypotheses_url"] is None and evaluation["backend"] is None
    listed = client.get(f"/v1/models/{model}/evaluations", headers=alice).json()
    assert listed["total"] == 1 and listed["data"][0]["id"] == evaluation["id"]
    read = client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}", headers=alice)
    assert read.json()["id"] == evaluation["id"]
    early = client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}/hypotheses", headers=alice)
    assert early.status_code == 409 and "queued, not succeeded" in early.json()["detail"]


@pytest.mark.parametrize(
    ("body", "loc", "message"),
    [
        ({"beam_size": 99}, ["body", "beam_size"], "beam_size=99 exceeds MAX_BEAM_SIZE"),
        ({"tokenize": "moses"}, ["body", "tokenize"], "Input should be"),
        ({"dataset_id": "mono"}, ["body", "dataset_id"], "is monolingual; a test set is parallel"),
        ({"dataset_id": "00000000-0000-0000-0000-000000000000"}, ["body", "dataset_id"], "not found"),
        ({"max_sentences": 0}, ["body", "max_sentences"], "greater than or equal to 1"),
    ],
)
def test_a_bad_request_is_422_naming_the_field_and_leaves_nothing(
    client, alice, parallel_id, mono_id, body, loc, message
):
    model = _model_row("alice")
    body = {"dataset_id": parallel_id, **body}
    if body["dataset_id"] == "mono":
        body["dataset_id"] = mono_id
    response = client.post(f"/v1/models/{model}/evaluations", json=body, headers=alice)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"][-len(loc) :] == loc[-len(loc) :] and message in d["msg"] for d in detail), detail
    assert client.get(f"/v1/models/{model}/evaluations", headers=alice).json()["total"] == 0


def test_a_denoising_model_is_not_scored(client, alice, parallel_id):
    model = _model_row("alice", objective="denoising")
    response = client.post(f"/v1/models/{model}/evaluations", json={"dataset_id": parallel_id}, headers=alice)
    assert response.status_code == 422 and "only translation is scored" in response.text


def test_another_owners_model_or_evaluation_is_404(client, alice, parallel_id, make_key):
    bob = make_key("bob")
    model = _model_row("alice")
    evaluation = client.post(f"/v1/models/{model}/evaluations", json={"dataset_id": parallel_id}, headers=alice).json()
    for path in ("", f"/{evaluation['id']}", f"/{evaluation['id']}/hypotheses"):
        assert client.get(f"/v1/models/{model}/evaluations{path}", headers=bob).status_code == 404
    theirs = _model_row("bob")
    assert (
        client.post(f"/v1/models/{theirs}/evaluations", json={"dataset_id": parallel_id}, headers=alice).status_code
        == 404
    )
    # alice's dataset is not bob's to score on
    response = client.post(f"/v1/models/{theirs}/evaluations", json={"dataset_id": parallel_id}, headers=bob)
    assert response.status_code == 422 and "not found" in response.text
    assert client.get(f"/v1/models/{model}/evaluations/{theirs}", headers=alice).status_code == 404


def test_a_job_may_name_a_test_set_of_the_right_kind(client, alice, parallel_id, mono_id):
    job = {"objective": "translation", "dataset_id": parallel_id, "training": {"max_steps": 5}}
    ok = client.post("/v1/jobs", json={**job, "test_dataset_id": parallel_id}, headers=alice)
    assert ok.status_code == 201 and ok.json()["test_dataset_id"] == parallel_id
    bad = client.post("/v1/jobs", json={**job, "test_dataset_id": mono_id}, headers=alice)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "test_dataset_id"


def test_the_task_fails_an_evaluation_whose_dataset_is_gone_and_skips_a_finished_one(client, alice, parallel_id):
    """The worker's task, run here: a test set gone after the request fails the evaluation, saying why (never
    left queued or running); a redelivered message for an evaluation that is over changes nothing. (The API refuses
    to delete a dataset a queued evaluation uses, 409: the row is deleted here directly.)"""
    from app.db.session import session_scope
    from app.db.tables import Dataset
    from worker.tasks.evaluation import evaluate_task

    model = _model_row("alice")
    evaluation = client.post(f"/v1/models/{model}/evaluations", json={"dataset_id": parallel_id}, headers=alice).json()
    assert client.delete(f"/v1/datasets/{parallel_id}", headers=alice).status_code == 409
    with session_scope() as session:
        session.delete(session.get(Dataset, parallel_id))
    evaluate_task.run(evaluation["id"])
    failed = client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}", headers=alice).json()
    assert failed["status"] == "failed" and "dataset None no longer exists" not in failed["error"], failed
    assert "its test set was deleted" in failed["error"], failed
    evaluate_task.run(evaluation["id"])  # redelivered: over, so left as it is
    assert client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}", headers=alice).json() == failed


class _Words:
    """A tokenizer whose tokens are the words of a text."""

    def encode(self, text: str) -> list[str]:
        return text.split()


def fake_decoder(monkeypatch, module, reply=str.upper, max_positions: int = 64, answered=None) -> list[dict]:
    """Serve every model to the task module `module` as a stand-in whose "translation" of a text is reply(text),
    with max_positions - 1 words at most; returns the decoder's calls ({"texts", "beam_size", "alpha", "backend"}).
    PyTorch answers when asked for; otherwise answered(call) when given, else CTranslate2."""
    from types import SimpleNamespace

    calls: list[dict] = []
    loaded = SimpleNamespace(
        objective="translation",
        model=SimpleNamespace(config=SimpleNamespace(max_positions=max_positions)),
        tokenizer=_Words(),
    )

    def translate(model, texts, options, backend):
        assert all(len(model.tokenizer.encode(t)) + 1 <= max_positions for t in texts), texts  # as source_ids checks
        calls.append({"texts": list(texts), "beam_size": options.beam_size, "alpha": options.alpha, "backend": backend})
        by = "pytorch" if backend == "pytorch" else answered(calls[-1]) if answered else "ctranslate2"
        return [{"text": reply(t)} for t in texts], by

    monkeypatch.setattr(module, "cache", lambda: SimpleNamespace(get=lambda model_id: loaded))
    monkeypatch.setattr(module, "translate", translate)
    return calls


def test_alpha_is_recorded_and_reaches_the_decoder(client, alice, parallel_id, monkeypatch):
    import worker.tasks.evaluation as task

    calls = fake_decoder(monkeypatch, task)
    model = _model_row("alice")
    body = {"dataset_id": parallel_id, "beam_size": 3, "alpha": 1.25}
    evaluation = client.post(f"/v1/models/{model}/evaluations", json=body, headers=alice).json()
    assert (evaluation["settings"]["alpha"], evaluation["settings"]["beam_size"]) == (1.25, 3)
    task.evaluate_task.run(evaluation["id"])
    done = client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}", headers=alice).json()
    assert done["status"] == "succeeded", done["error"]
    assert calls == [{"texts": ["one", "two"], "beam_size": 3, "alpha": 1.25, "backend": "auto"}]
    assert done["settings"]["alpha"] == 1.25 and "tok:13a" in done["scores"]["bleu"]["signature"]
    assert done["backend"] == "ctranslate2"  # what the default, auto, was answered by
    hypotheses = client.get(done["hypotheses_url"], headers=alice).text
    assert hypotheses == "ONE\nTWO\n"


def test_an_evaluation_asking_for_pytorch_is_translated_and_recorded_so(client, alice, parallel_id, monkeypatch):
    import worker.tasks.evaluation as task

    calls = fake_decoder(monkeypatch, task)
    model = _model_row("alice")
    body = {"dataset_id": parallel_id, "backend": "pytorch"}
    evaluation = client.post(f"/v1/models/{model}/evaluations", json=body, headers=alice).json()
    task.evaluate_task.run(evaluation["id"])
    done = client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}", headers=alice).json()
    assert (done["status"], done["backend"], done["settings"]["backend"]) == ("succeeded", "pytorch", "pytorch")
    assert [c["backend"] for c in calls] == ["pytorch"]
    bad = client.post(f"/v1/models/{model}/evaluations", json={**body, "backend": "marian"}, headers=alice)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "backend"


def test_ctranslate2_failing_part_way_starts_the_evaluation_over_on_pytorch(client, alice, parallel_id, monkeypatch):
    """Fault: under auto, CTranslate2 answers the first chunk, then fails and PyTorch answers the second. Pass: the
    whole test set is translated again with PyTorch, so the scores are one backend's, and recorded as PyTorch's."""
    import worker.tasks.evaluation as task

    monkeypatch.setattr(task, "CHUNK", 1)  # the test set's two rows in two chunks
    calls = fake_decoder(
        monkeypatch, task, answered=lambda call: "ctranslate2" if call["texts"] == ["one"] else "pytorch"
    )
    model = _model_row("alice")
    evaluation = client.post(f"/v1/models/{model}/evaluations", json={"dataset_id": parallel_id}, headers=alice).json()
    task.evaluate_task.run(evaluation["id"])
    done = client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}", headers=alice).json()
    assert (done["status"], done["backend"], done["translated"]) == ("succeeded", "pytorch", 2), done
    assert [(c["texts"], c["backend"]) for c in calls] == [
        (["one"], "auto"), (["two"], "auto"), (["one"], "pytorch"), (["two"], "pytorch")
    ]  # fmt: skip


@pytest.mark.parametrize(("alpha", "message"), [(-0.1, "greater than or equal to 0"), (2.5, "less than or equal to 2")])
def test_an_alpha_out_of_range_is_422(client, alice, parallel_id, alpha, message):
    model = _model_row("alice")
    response = client.post(
        f"/v1/models/{model}/evaluations", json={"dataset_id": parallel_id, "alpha": alpha}, headers=alice
    )
    assert response.status_code == 422
    assert any(d["loc"][-1] == "alpha" and message in d["msg"] for d in response.json()["detail"]), response.text


def test_the_command_line_evaluates_with_the_beam_and_alpha_asked_for(client, alice, parallel_id, monkeypatch, capsys):
    """`evaluate --beam-size 2 --alpha 1.5`: the request carries them, the row records them, the decoder gets
    them (the task run inline here), and the scores are printed with their signatures."""
    from contextlib import nullcontext

    import app.api.evaluations as route
    import app.client.connection as connection
    import worker.tasks.evaluation as task
    from app.cli import main

    calls = fake_decoder(monkeypatch, task)
    monkeypatch.setattr(route, "dispatch", lambda evaluation_id: task.evaluate_task.run(evaluation_id))
    client.headers.update(alice)
    monkeypatch.setattr(connection, "open_client", lambda args: nullcontext(client))  # requests in process
    model = _model_row("alice")
    argv = ["evaluate", model, "--dataset", parallel_id, "--beam-size", "2", "--alpha", "1.5", "--interval", "0"]
    main(argv)
    assert calls == [{"texts": ["one", "two"], "beam_size": 2, "alpha": 1.5, "backend": "auto"}]
    printed = capsys.readouterr().out
    assert printed.startswith("bleu") and "tok:13a" in printed and "chrf++" in printed, printed
    assert printed.splitlines()[-1] == "backend ctranslate2"  # what auto was answered by
    row = client.get(f"/v1/models/{model}/evaluations", headers=alice).json()["data"][0]
    assert (row["settings"]["beam_size"], row["settings"]["alpha"]) == (2, 1.5)


def _installed(module: str) -> bool:
    from importlib.util import find_spec

    return find_spec(module) is not None


@pytest.mark.parametrize(
    ("tokenize", "missing", "message"),
    [
        pytest.param(
            "ja-mecab",
            "",
            "tokenizer 'ja-mecab' is not installed on the inference workers: pip install 'sacrebleu[ja]'",
            marks=pytest.mark.skipif(_installed("MeCab"), reason="MeCab is installed here"),
        ),
        pytest.param(
            "ko-mecab",
            "",
            "tokenizer 'ko-mecab' is not installed on the inference workers: pip install 'sacrebleu[ko]'",
            marks=pytest.mark.skipif(_installed("mecab_ko"), reason="mecab-ko is installed here"),
        ),
        ("flores200", "flores200sacrebleuspm", "tokenizer 'flores200' needs its SentencePiece model"),
        ("flores101", "sacrebleu_tokenizer_spm.model", "tokenizer 'flores101' needs its SentencePiece model"),
    ],
)
def test_a_tokenizer_the_workers_lack_fails_the_evaluation_before_anything_is_translated(
    client, alice, parallel_id, monkeypatch, tmp_path, tokenize, missing, message
):
    """Before the model is loaded or a sentence translated, with an error naming the tokenizer and what to
    install; a flores model is never downloaded (sacrebleu's folder is an empty one here)."""
    import sacrebleu.tokenizers.tokenizer_spm as spm

    import worker.tasks.evaluation as task

    calls = fake_decoder(monkeypatch, task)
    monkeypatch.setattr(spm, "SACREBLEU_DIR", str(tmp_path / "sacrebleu"))
    monkeypatch.setattr(spm, "download_file", lambda *a, **k: pytest.fail("sacrebleu tried a download"))
    model = _model_row("alice")
    body = {"dataset_id": parallel_id, "tokenize": tokenize}
    evaluation = client.post(f"/v1/models/{model}/evaluations", json=body, headers=alice).json()
    task.evaluate_task.run(evaluation["id"])
    failed = client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}", headers=alice).json()
    assert failed["status"] == "failed" and message in failed["error"], failed
    if missing:  # where to save it
        assert str(tmp_path / "sacrebleu" / "models" / missing) in failed["error"], failed
    assert calls == [] and failed["started_at"] is None and failed["translated"] == 0


def test_metrics_name_a_missing_module_or_a_corrupt_sentencepiece_model(tmp_path, monkeypatch):
    """The checks behind the test above, wherever MeCab happens to be installed or not."""
    import sacrebleu.tokenizers.tokenizer_spm as spm

    import worker.tasks.evaluation as task
    from worker.serving.errors import RequestError
    from worker.tasks.evaluation import metrics

    with monkeypatch.context() as patch:  # MeCab without its dictionary
        patch.setattr(task, "find_spec", lambda name: None if name == "ipadic" else object())
        with pytest.raises(RequestError, match=r"'ja-mecab' is not installed .*: pip install 'sacrebleu\[ja\]'$"):
            metrics("ja-mecab")

    monkeypatch.setattr(spm, "SACREBLEU_DIR", str(tmp_path))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "flores200sacrebleuspm").write_bytes(b"not a model")
    with pytest.raises(RequestError, match="tokenizer 'flores200' could not be loaded on the inference workers"):
        metrics("flores200")
    assert set(metrics("intl")) == {"bleu", "chrf", "chrf++"}
