"""A text file translated by the served numbers model with a real inference worker: the result has the file's
lines, blank lines and spacing, and each number is translated as POST /translate translates it."""

from __future__ import annotations

from num2words import num2words

from bench.harness.stack import run_cli, wait_for


def test_a_file_comes_back_with_its_lines_and_spacing_and_the_translate_routes_answers(served, tmp_path):
    api, model_id = served["api"], served["models"]["translation"]
    a, b, c, d = (num2words(n, lang="en") for n in served["held_out"][:4])
    text = f"{a}\n\n  {b}.   {c}.  \n{d}\r\n"
    response = api.http.post(
        f"/v1/models/{model_id}/translations", files={"file": ("numbers.txt", text.encode())}, data={"beam_size": "4"}
    )
    assert response.status_code == 202, response.text

    def over():
        got = api.http.get(f"/v1/models/{model_id}/translations/{response.json()['id']}").json()
        return got if got["status"] in ("succeeded", "failed") else None

    done = wait_for(over, timeout=120, what="the file translation", interval=0.5)
    assert done["status"] == "succeeded", done["error"]
    assert (done["lines"], done["sentences"], done["translated"], done["progress"]) == (4, 4, 4, 1.0)
    result = api.http.get(done["result_url"])
    assert result.status_code == 200 and result.headers["content-type"].startswith("text/plain")
    assert f"numbers.{model_id[:8]}.txt" in result.headers["content-disposition"]
    # each sentence alone, as /translate does it (the splitter keeps "b." and "c." whole, with their periods)
    alone = api.http.post(
        f"/v1/models/{model_id}/translate", json={"texts": [a, f"{b}.", f"{c}.", d], "beam_size": 4}
    ).json()
    ta, tb, tc, td = (t["text"] for t in alone["translations"])
    assert done["backend"] == alone["backend"] == "ctranslate2"  # both left it to the service
    assert result.text == f"{ta}\n\n  {tb}   {tc}  \n{td}\r\n"


def test_the_command_line_translates_a_file(served, tmp_path):
    api, model_id = served["api"], served["models"]["translation"]
    key = api.http.headers["authorization"].removeprefix("Bearer ")
    source = tmp_path / "in.txt"
    source.write_text("forty two\n\nthree hundred and twelve\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    printed = run_cli(
        served["env"], "translate", model_id, str(source), "-o", str(out), "--url", served["url"], "--key", key
    )
    assert printed.strip() == str(out)
    lines = out.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == "" and lines[0] and lines[2]
