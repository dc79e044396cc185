"""POST/GET /v1/models/{id}/translations checked before a worker is involved: ownership, the model's objective,
the file (UTF-8, not empty, under MAX_UPLOAD_MB), the result 409 until done; the task run here fails a
translation whose model files are missing, saying so."""

from __future__ import annotations

import pytest

from tests.api.test_init_model import _model_row

TEXT = "forty two. three hundred and twelve.\n\n  nine\n"


def _post(client, headers, model, data: bytes = TEXT.encode(), name="doc.txt", **form):
    return client.post(f"/v1/models/{model}/translations", files={"file": (name, data)}, data=form, headers=headers)


def test_a_file_is_queued_listed_and_read(client, alice):
    model = _model_row("alice")
    response = _post(client, alice, model, beam_size="2", language="en")
    assert response.status_code == 202, response.text
    row = response.json()
    assert (row["status"], row["lines"], row["filename"], row["progress"]) == ("queued", 3, "doc.txt", 0.0)
    assert row["settings"] == {"beam_size": 2, "language": "en", "backend": "auto"} and row["result_url"] is None
    assert row["backend"] is None  # until a worker has translated it
    listed = client.get(f"/v1/models/{model}/translations", headers=alice).json()
    assert listed["total"] == 1 and listed["data"][0]["id"] == row["id"]
    early = client.get(f"/v1/models/{model}/translations/{row['id']}/result", headers=alice)
    assert early.status_code == 409 and "is queued, not succeeded" in early.json()["detail"]


@pytest.mark.parametrize(
    ("data", "form", "loc", "message"),
    [
        (b"caf\xe9\n", {}, "file", "not UTF-8 text (byte 3"),
        (b" \n\n", {}, "file", "the file is empty"),
        (TEXT.encode(), {"beam_size": "99"}, "beam_size", "exceeds MAX_BEAM_SIZE"),
        (TEXT.encode(), {"owner": "bob"}, "owner", "unknown form field"),
        (TEXT.encode(), {"backend": "marian"}, "backend", "Input should be 'auto', 'pytorch' or 'ctranslate2'"),
    ],
)
def test_a_bad_upload_is_422_naming_the_problem_and_leaves_nothing(
    client, alice, settings_env, data, form, loc, message
):
    model = _model_row("alice")
    response = _post(client, alice, model, data, **form)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"][-1] == loc and message in d["msg"] for d in detail), detail
    assert client.get(f"/v1/models/{model}/translations", headers=alice).json()["total"] == 0
    from app.artifacts import get_store

    assert not get_store().exists(f"translations/{model}")  # no upload kept


def test_over_max_upload_mb_is_413(client, alice, settings_env):
    settings_env(MAX_UPLOAD_MB="1")
    response = _post(client, alice, _model_row("alice"), b"forty two\n" * 120_000)
    assert response.status_code == 413 and "MAX_UPLOAD_MB=1" in response.json()["detail"]


def test_a_denoising_model_or_another_owners_is_refused(client, alice, make_key):
    assert "not translation" in _post(client, alice, _model_row("alice", objective="denoising")).text
    bob = make_key("bob")
    model = _model_row("alice")
    row = _post(client, alice, model).json()
    assert _post(client, bob, model).status_code == 404
    for path in ("", f"/{row['id']}", f"/{row['id']}/result"):
        assert client.get(f"/v1/models/{model}/translations{path}", headers=bob).status_code == 404


def test_the_task_fails_a_translation_whose_model_files_are_missing(client, alice):
    from worker.tasks.file_translation import translate_file_task

    model = _model_row("alice")  # a row without files
    row = _post(client, alice, model).json()
    translate_file_task.run(row["id"])
    failed = client.get(f"/v1/models/{model}/translations/{row['id']}", headers=alice).json()
    assert failed["status"] == "failed" and "files are missing" in failed["error"], failed
    assert failed["sentences"] == 3  # "forty two.", "three hundred and twelve.", "nine"
    translate_file_task.run(row["id"])  # redelivered: over, left as it is
    assert client.get(f"/v1/models/{model}/translations/{row['id']}", headers=alice).json() == failed


def test_the_task_cuts_a_sentence_too_long_and_keeps_the_files_lines_when_a_translation_has_line_breaks(
    client, alice, monkeypatch
):
    """A model taking 6 tokens (5 words and </s>): the 12-word sentence is translated in pieces that fit, joined
    with a space (none is copied through untranslated); a translation that comes back on two lines is made one
    line, so the result has the file's lines."""
    import worker.tasks.file_translation as task
    from tests.api.test_evaluations import fake_decoder

    calls = fake_decoder(monkeypatch, task, reply=lambda text: f"{text.upper()}\n(2)", max_positions=6)
    long = " ".join(f"w{i}" for i in range(12)) + "."
    text = f"short one. {long}\n\n  nine\r\n"
    model = _model_row("alice")
    row = _post(client, alice, model, text.encode(), beam_size="3").json()
    task.translate_file_task.run(row["id"])
    done = client.get(f"/v1/models/{model}/translations/{row['id']}", headers=alice).json()
    assert done["status"] == "succeeded", done["error"]
    assert (done["sentences"], done["translated"], done["settings"]["untranslated"]) == (3, 3, 0)
    assert [t for call in calls for t in call["texts"]] == [
        "short one.",
        "w0 w1 w2 w3 w4",
        "w5 w6 w7 w8 w9",
        "w10 w11.",
        "nine",
    ]
    assert {(call["beam_size"], call["backend"]) for call in calls} == {(3, "auto")}
    assert done["backend"] == "ctranslate2"
    result = client.get(done["result_url"], headers=alice).text
    assert result.split("\n") == [
        "SHORT ONE. (2) W0 W1 W2 W3 W4 (2) W5 W6 W7 W8 W9 (2) W10 W11. (2)",
        "",
        "  NINE (2)\r",
        "",
    ]
    assert len(result.split("\n")) == len(text.split("\n"))


def test_a_file_asking_for_pytorch_is_translated_by_it_and_says_so(client, alice, monkeypatch):
    import worker.tasks.file_translation as task
    from tests.api.test_evaluations import fake_decoder

    calls = fake_decoder(monkeypatch, task)
    model = _model_row("alice")
    row = _post(client, alice, model, backend="pytorch").json()
    task.translate_file_task.run(row["id"])
    done = client.get(f"/v1/models/{model}/translations/{row['id']}", headers=alice).json()
    assert (done["status"], done["backend"], done["settings"]["backend"]) == ("succeeded", "pytorch", "pytorch")
    assert {c["backend"] for c in calls} == {"pytorch"}


def test_ctranslate2_failing_part_way_translates_the_file_again_on_pytorch(client, alice, monkeypatch):
    """Fault: under auto, CTranslate2 answers the first chunk and PyTorch (after a CTranslate2 failure) the
    second. Pass: the file is translated again by PyTorch alone, and says so."""
    import worker.tasks.file_translation as task
    from tests.api.test_evaluations import fake_decoder

    monkeypatch.setattr(task, "CHUNK", 2)
    calls = fake_decoder(monkeypatch, task, answered=lambda call: "ctranslate2" if len(calls) == 1 else "pytorch")
    model = _model_row("alice")
    row = _post(client, alice, model).json()  # three sentences: two chunks
    task.translate_file_task.run(row["id"])
    done = client.get(f"/v1/models/{model}/translations/{row['id']}", headers=alice).json()
    assert (done["status"], done["backend"]) == ("succeeded", "pytorch"), done
    assert [c["backend"] for c in calls] == ["auto", "auto", "pytorch", "pytorch"]
    assert client.get(done["result_url"], headers=alice).text == TEXT.upper()
