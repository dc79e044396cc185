"""The command line's flags for models of several language pairs: `submit --pair` (one model for every pair), and
`translate`/`evaluate --target-language` (the target a model of several pairs translates into)."""

from __future__ import annotations

from tests.api.test_cli import _key
from tests.api.test_job_pairs import _dataset, _model_of_pairs


def test_submit_pairs_trains_one_model_for_every_pair(cli, alice, client):
    de = _dataset(client, alice)
    fr = _dataset(client, alice, [("one", "un"), ("two", "deux")], ("en", "fr"))
    code, out, err = cli("submit", "--pair", de, "--pair", fr, "--max-steps", "5", "--key", _key(alice))
    assert code == 0, err
    job = client.get(f"/v1/jobs/{out.strip()}", headers=alice).json()
    assert [(p["dataset_id"], p["target_language"]) for p in job["pairs"]] == [(de, "de"), (fr, "fr")]
    code, _, err = cli("submit", "--pair", de, "--dataset", fr, "--key", _key(alice))
    assert code == 2 and "not allowed with argument" in err  # one or the other


def test_translate_and_evaluate_send_the_target_language(cli, alice, client, tmp_path):
    model_id = _model_of_pairs("de", "fr")
    key = _key(alice)
    code, _, err = cli("translate", model_id, "--text", "forty two", "--key", key)
    assert code == 1 and "give target_language, one of de, fr" in err, err
    code, _, err = cli("translate", model_id, "--text", "forty two", "--target-language", "nl", "--key", key)
    assert code == 1 and "cannot translate into 'nl'" in err, err
    text = tmp_path / "in.txt"
    text.write_text("forty two\n")
    code, _, err = cli("translate", model_id, str(text), "--target-language", "nl", "--key", key)
    assert code == 1 and "cannot translate into 'nl'" in err, err
    test_set = _dataset(client, alice, [("one", "een"), ("two", "twee")], ("en", "nl"))
    code, _, err = cli("evaluate", model_id, "--dataset", test_set, "--target-language", "nl", "--key", key)
    assert code == 1 and "cannot translate into 'nl'" in err, err
