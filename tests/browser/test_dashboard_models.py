"""The dashboard in a real browser, on the model the submitted job trained (tests/browser/test_dashboard.py follows
it first): the playground, translation memory, glossary, export, evaluation, fine-tuning, import, file
translation, attention, and the registry card."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from bench.harness.stack import wait_for
from tests.browser.support import TERMINAL, api, fill_training_form, model_rows, tab


@pytest.fixture(scope="module", autouse=True)
def trained(submitted):
    """The submitted job succeeded: test_dashboard.py watched it train; run alone, this file waits for it here."""
    http = api(submitted[0].stack)
    job = wait_for(lambda: (j := http.get(f"/v1/jobs/{submitted[1]}").json())["status"] in TERMINAL and j, 400, "job")
    assert job["status"] == "succeeded", job


def test_model_playground_translates_with_alternatives_and_alignment(submitted):
    p, job_id = submitted
    page = p.page
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    tab(p, "Translate").click()
    page.wait_for_selector("#translate-form")
    nonsense = ["zq xv wk qq", "qwertyuiop asdfgh", "purple elephants dance quietly"]
    page.get_by_label("Text", exact=True).fill("\n".join(["forty two", *nonsense]))
    page.get_by_role("button", name="Translate", exact=True).click()
    page.wait_for_selector(".translation-text", timeout=60_000)
    assert page.locator(".translation-text").first.inner_text().strip()
    assert page.locator(".alternatives li").count() >= 2
    alignment = page.locator("svg.alignment").first  # one line per target token (none if the output is empty)
    n_target = int(re.search(r"alignment of (\d+) target", alignment.get_attribute("aria-label")).group(1))
    assert alignment.locator("line.align-line").count() == n_target
    # each target token and </s> with its probability, and their geometric mean beside the score
    chips = page.locator(".token-probs").first.locator(".token-prob")
    assert chips.count() == n_target + 1 and chips.last.inner_text() == "</s>"
    assert re.search(r"confidence 0\.\d+|confidence 1", page.locator(".confidence").first.inner_text())
    # the low-confidence badge where the confidence is below the model's calibrated threshold, and only there
    model_id = page.url.split("/models/")[1].split("/")[0]
    calibration = api(p.stack).get(f"/v1/models/{model_id}").json()["confidence_calibration"]
    threshold = calibration["threshold"]
    texts = page.locator(".confidence").all_inner_texts()
    shown = [float(re.search(r"confidence ([\d.]+)", c).group(1)) for c in texts]
    badges = [t.locator(".low-confidence").count() for t in page.locator(".translation-text").all()]
    assert len(shown) == len(badges) == 4 and badges == [int(c < threshold) for c in shown], (shown, badges, threshold)
    # the badge shows on the nonsense lines: on some, as a briefly trained model is sometimes sure of nonsense
    assert sum(badges[1:]) >= 1, (shown, badges, threshold)
    p.screenshot("model-translate")
    tab(p, "Overview").click()  # the flag's calibration on the overview, as the API gives it
    card = page.locator("#confidence-calibration")
    assert card.locator("#confidence-threshold").inner_text() == str(float(f"{threshold:.4g}"))  # fmtNumber's
    assert f"of {calibration['sentences']} validation sentences" in card.inner_text()
    p.screenshot("model-confidence")


def test_model_playground_looks_texts_up_in_a_translation_memory(submitted, demo_files):
    """The training data as the memory, exact matches used: a text of it comes back as its stored target, marked
    "from memory", with its match at 100%; a text not in it is translated, its fuzzy matches (if any) listed."""
    p, job_id = submitted
    page = p.page
    source, target = json.loads(Path(demo_files["translation_train"]).read_text().splitlines()[0]).values()
    dataset_id = next(
        d["id"] for d in api(p.stack).get("/v1/datasets?limit=500").json()["data"] if d["name"] == "numbers en-de"
    )
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    tab(p, "Translate").click()
    page.locator(f'#memory-dataset option[value="{dataset_id}"]').wait_for(state="attached")
    page.select_option("#memory-dataset", dataset_id)
    page.check("#memory-replace")
    page.get_by_label("Text", exact=True).fill(f"{source}\nzq xv wk qq")
    page.get_by_role("button", name="Translate", exact=True).click()
    page.wait_for_selector(".translation-text", timeout=60_000)
    first, second = page.locator(".translation").all()
    assert first.locator(".translation-text").inner_text().startswith(target)
    assert first.locator(".memory-origin").inner_text() == "from memory"
    assert first.locator(".memory-matches tr").first.inner_text().startswith("100%")
    assert second.locator(".memory-origin").count() == 0 and second.locator(".translation-text .muted").count() >= 1
    p.screenshot("model-memory")


def test_model_playground_translates_with_a_glossary(submitted):
    """A glossary chosen in the playground: its term found in the text is in the translation, and the line under it
    says which term and how it got there."""
    p, job_id = submitted
    page = p.page
    glossary = api(p.stack).post(
        "/v1/glossaries",
        json={
            "name": "playground terms",
            "source_language": "en",
            "target_language": "de",
            "case_sensitive": True,  # VIERZIG is not the model's vierzig
            "entries": [{"source": "forty", "target": "VIERZIG"}],
        },
    )
    assert glossary.status_code == 201, glossary.text
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    tab(p, "Translate").click()
    page.locator(f'#glossary-choice option[value="{glossary.json()["id"]}"]').wait_for(state="attached")
    page.select_option("#glossary-choice", glossary.json()["id"])
    page.select_option("#memory-dataset", "")
    page.get_by_label("Text", exact=True).fill("forty two")
    page.get_by_role("button", name="Translate", exact=True).click()
    page.wait_for_selector(".glossary-applied", timeout=60_000)
    assert "VIERZIG" in page.locator(".translation-text").first.inner_text()
    assert page.locator(".glossary-applied").inner_text().startswith("glossary: forty → VIERZIG (")
    p.screenshot("model-glossary")
    tab(p, "Anatomy").click()
    page.wait_for_selector('#anatomy [data-component="encoder.layers.0.self_attn"]')
    segments = page.locator('#anatomy [data-component="decoder.layers.1.encoder_attn"] .seg').all_inner_texts()
    assert {"W_Q", "W_K", "W_V", "W_O"} <= set(segments)
    tab(p, "Embeddings").click()
    page.get_by_label("Token", exact=True).fill("hundred")
    page.get_by_role("button", name="Find neighbours").click()
    page.wait_for_selector("#neighbors-result .bar-row")
    p.screenshot("model")


def test_the_model_page_downloads_an_export(submitted, tmp_path):
    """The Hugging Face button: the archive the browser saves holds the MarianMTModel folder."""
    import tarfile

    p, job_id = submitted
    page = p.page
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    page.wait_for_selector("#downloads")
    model_id = page.url.rsplit("/", 1)[1]
    with page.expect_download(timeout=120_000) as info:
        page.locator('#downloads button[data-format="huggingface"]').click()
    saved = tmp_path / info.value.suggested_filename
    info.value.save_as(saved)
    assert saved.name == f"{model_id}-huggingface.tar.gz"
    with tarfile.open(saved) as tar:
        names = tar.getnames()
    assert {f"{model_id}-huggingface/config.json", f"{model_id}-huggingface/model.safetensors"} <= set(names)
    page.wait_for_function("document.querySelector('#download-status').textContent.startsWith('Downloaded')")
    p.screenshot("model-download")


def test_the_model_page_evaluates_on_a_test_set_and_shows_the_scores(submitted):
    """Evaluate on a parallel dataset: the row shows progress, then BLEU, chrF and chrF++ with the signature on
    hover, and the hypotheses button; the scores are the API's."""
    p, job_id = submitted
    page = p.page
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    tab(p, "Evaluations").click()
    page.wait_for_selector("#evaluate-dataset option", state="attached")
    model_id = page.url.rsplit("/", 2)[1]  # #/models/<id>/evaluations
    page.locator("#evaluate-tokenize").select_option("intl")
    assert page.locator("#evaluate-alpha").input_value() == "0.6"
    page.locator("#evaluate-alpha").fill("0.8")
    page.get_by_role("button", name="Evaluate", exact=True).click()
    page.wait_for_selector("#evaluations-table tr[data-evaluation] .status-succeeded", timeout=120_000)
    headers = {"Authorization": f"Bearer {p.stack.key}"}
    evaluation = httpx.get(f"{p.stack.url}/v1/models/{model_id}/evaluations", headers=headers).json()["data"][0]
    assert evaluation["settings"]["alpha"] == 0.8
    assert "alpha 0.8" in page.locator('#evaluations-table td[data-label="Settings"]').first.inner_text()
    chrf = page.locator('#evaluations-table td[data-label="chrF"] span').first
    assert chrf.inner_text() == f"{evaluation['scores']['chrf']['score']:.2f}"
    assert "tok:intl" in page.locator('#evaluations-table td[data-label="BLEU"] span').first.get_attribute("title")
    assert page.locator("#evaluations-table button", has_text="hypotheses").count() == 1
    split = evaluation["scores"]["confidence"]  # the model's low-confidence flag on this test set
    shown = page.locator('#evaluations-table td[data-label="Low confidence"]').first.inner_text()
    assert shown.startswith(f"{100 * split['flagged_share']:.0f}% (chrF "), (shown, split)
    page.locator("#evaluations").scroll_into_view_if_needed()
    p.screenshot("model-evaluations")


def test_fine_tune_starts_a_job_from_the_model_and_its_model_names_the_parent(submitted):
    """The model page's Fine-tune button opens the form starting from that model (its architecture card hidden);
    the job trains, scores its test set, and its model links back to the parent."""
    p, job_id = submitted
    page = p.page
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    page.wait_for_selector("#fine-tune")
    parent = page.url.rsplit("/", 1)[1]
    page.locator("#fine-tune").click()
    page.wait_for_selector(f"#init-model option[value='{parent}']", state="attached")
    assert page.locator("#init-model").input_value() == parent
    assert page.locator("#model-settings").is_hidden()
    page.locator("#estimate", has_text=f"model {parent[:8]}'s architecture").wait_for()
    page.locator("#test-dataset").select_option(index=1)
    fill_training_form(p, max_steps=10, warmup_steps=5, eval_every=10, checkpoint_every=10, max_tokens_per_batch=2048)
    p.screenshot("new-job-fine-tune")
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(re.compile(r".*#/jobs/[0-9a-f-]{36}$"))
    page.wait_for_selector("#model-link", timeout=180_000)
    page.locator("#model-link").click()
    page.wait_for_selector("#parent-model")
    assert page.locator("#parent-model").get_attribute("href") == f"#/models/{parent}"
    tab(p, "Evaluations").click()
    page.wait_for_selector("#evaluations-table tr[data-evaluation] .status-succeeded", timeout=120_000)
    assert "(its job's)" in page.inner_text("#evaluations-table")
    p.screenshot("model-fine-tuned")


def test_the_models_page_imports_an_archive_and_says_why_it_refuses_one(submitted, tmp_path):
    p, job_id = submitted
    page = p.page
    headers = {"Authorization": f"Bearer {p.stack.key}"}
    model_id = httpx.get(f"{p.stack.url}/v1/jobs/{job_id}", headers=headers).json()["model_id"]
    archive = httpx.get(f"{p.stack.url}/v1/models/{model_id}/export?format=native", headers=headers, timeout=120)
    assert archive.status_code == 200
    (tmp_path / "native.tar.gz").write_bytes(archive.content)
    (tmp_path / "junk.tar.gz").write_bytes(b"not an archive")
    page.goto(f"{p.stack.url}/dashboard#/models")
    page.locator("#import summary").click()
    page.locator("#import-file").set_input_files(str(tmp_path / "junk.tar.gz"))
    page.locator("#import-button").click()
    page.locator("#import-status .error", has_text="not a readable .tar.gz archive").wait_for()
    page.locator("#import-file").set_input_files(str(tmp_path / "native.tar.gz"))
    page.locator("#import-button").click()
    page.wait_for_url(re.compile(r".*#/models/[0-9a-f-]{36}$"), timeout=60_000)
    imported = page.url.rsplit("/", 1)[1]
    assert imported != model_id
    page.locator(".page-head", has_text="imported").wait_for()
    p.screenshot("model-imported")


def test_the_model_page_translates_a_file(submitted, tmp_path):
    """Upload a text file with its source language and a beam: progress, then a download of the same lines
    translated; the translation used the language and beam asked for."""
    p, job_id = submitted
    page = p.page
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    tab(p, "Translate").click()
    page.wait_for_selector("#file-translation")
    model_id = page.url.rsplit("/", 2)[1]  # #/models/<id>/playground
    source = tmp_path / "numbers.txt"
    source.write_text("forty two\n\nthree hundred and twelve\n", encoding="utf-8")
    page.locator("#translate-file").set_input_files(str(source))
    language, beam = page.locator("#translate-language"), page.locator("#translate-beam")
    assert (language.input_value(), beam.input_value()) == ("en", "4")
    language.fill("de")
    beam.fill("2")
    page.locator("#translate-file-button").click()
    page.wait_for_selector("#file-translation-download", timeout=60_000)
    assert "(de, beam 2)" in page.inner_text("#file-translation-status")
    headers = {"Authorization": f"Bearer {p.stack.key}"}
    row = httpx.get(f"{p.stack.url}/v1/models/{model_id}/translations", headers=headers).json()["data"][0]
    assert (row["settings"]["language"], row["settings"]["beam_size"]) == ("de", 2)
    with page.expect_download() as info:
        page.locator("#file-translation-download").click()
    saved = tmp_path / "out.txt"
    info.value.save_as(saved)
    lines = saved.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[0] and lines[2]
    page.locator("#file-translation").scroll_into_view_if_needed()
    p.screenshot("model-file-translation")


def test_attention_viewer_draws_heatmaps_with_hover(submitted):
    p, _ = submitted
    page = p.page
    tab(p, "Attention").click()  # the model's page, where the test before left it
    page.get_by_label("Source text").fill("forty two")
    page.get_by_role("button", name="Show attention").click()
    page.wait_for_selector("svg.heatmap rect.cell", timeout=60_000)
    assert page.locator(".heat-card").count() == 3
    cells = page.locator("svg.heatmap").first.locator("rect.cell")
    assert cells.count() >= 4
    cells.nth(1).hover()
    assert "→" in page.locator(".heat-readout").first.inner_text()
    page.get_by_label("Layer", exact=True).select_option("1")
    page.get_by_label("Head", exact=True).select_option("2")
    assert "layer 2, head 3" in page.locator(".heat-card figcaption").first.inner_text()
    page.locator("#attention").scroll_into_view_if_needed()
    p.screenshot("attention")


def test_the_model_page_registers_a_model_and_points_an_alias_at_it(page, stack):
    """The registry card names a model (it becomes that name's next version, shown as name@version on its page and
    in the list), saves tags, description and languages, refuses a bad name saying why, and points an alias of the
    name at the version shown; name@alias opens the version it points at. The card lists the alias's moves, newest
    first: from which version to which, by which key."""
    first, second = model_rows(stack, 2)
    http = api(stack)
    p = page
    p.sign_in()
    for model_id, version in ((first, 1), (second, 2)):
        p.open(f"#/models/{model_id}")
        p.page.locator("#registry").wait_for()
        assert p.page.locator("#model-ref").inner_text() == "not registered"
        p.page.locator("#model-name").fill("Numbers EN")
        p.page.get_by_role("button", name="Save", exact=True).click()
        refusal = p.page.locator("#registry-status .error")
        refusal.wait_for()
        assert "Not saved" in refusal.inner_text() and "'Numbers EN'" in refusal.inner_text()
        p.page.locator("#model-name").fill("numbers-en-de")
        p.page.locator("#model-tags").fill("numbers, small, numbers")
        p.page.locator("#model-source-language").fill("en")
        p.page.locator("#model-target-language").fill("de")
        p.page.locator("#model-description").fill("spells numbers in German")
        p.page.locator("#model-license").fill("apache-2.0")
        p.page.get_by_role("button", name="Save", exact=True).click()
        p.page.locator("#model-ref", has_text=f"numbers-en-de@{version}").wait_for()
        assert p.page.locator("h1").inner_text() == f"Model numbers-en-de@{version}"
        assert p.page.locator("#model-tags").input_value() == "numbers, small"
        p.page.locator("#alias-name").fill("production")
        p.page.get_by_role("button", name="Point alias here").click()
        p.page.locator("#registry .tag.alias", has_text="@production").wait_for()
        assert http.get("/v1/models/numbers-en-de@production").json()["id"] == model_id
        moves = p.page.locator("#alias-moves-table tbody tr")
        moves.nth(version - 1).wait_for()  # the move just made, listed with the earlier ones
        listed = [
            [moves.nth(i).locator(f"td.{cell}").inner_text() for cell in ("from", "to", "by")]
            for i in range(moves.count())
        ]
        by = f"{stack.key[:10]}…"
        made = [["numbers-en-de@1", "numbers-en-de@2", by]] if version == 2 else []
        assert listed == [*made, ["new", "numbers-en-de@1", by]], listed
        assert moves.first.locator("td").nth(1).inner_text() == "@production"
    p.screenshot("model-registry")
    p.page.locator("#model-card-box summary").click()  # the card its downloads carry says what was just saved
    p.page.locator("#model-card", has_text="license: apache-2.0").wait_for()
    card = p.page.locator("#model-card").inner_text()
    assert card.startswith("---\nlanguage:\n- en\n- de\n") and "# numbers-en-de v2" in card
    p.screenshot("model-card")
    saved = http.get(f"/v1/models/{first}").json()
    assert (saved["name"], saved["version"], saved["tags"], saved["aliases"]) == (
        "numbers-en-de",
        1,
        ["numbers", "small"],
        [],  # production moved on to version 2
    )
    assert (saved["source_language"], saved["target_language"], saved["license"]) == ("en", "de", "apache-2.0")
    history = http.get("/v1/models/numbers-en-de/aliases/production/history").json()["data"]
    assert [(e["from_version"], e["to_version"]) for e in history] == [(1, 2), (None, 1)]

    p.page.get_by_role("navigation").get_by_role("link", name="Models").click()
    # the list's own links (a.model-ref): the model page's alias moves link both versions too, and may still be
    # shown for a moment before the list replaces it
    listed = p.page.locator("a.model-ref")
    listed.filter(has_text="numbers-en-de@2").wait_for()
    assert listed.filter(has_text="numbers-en-de@1").count() == 1
    p.screenshot("models-registered")
    p.open("#/models/numbers-en-de@production")
    p.page.locator("#model-ref", has_text="numbers-en-de@2").wait_for()
    assert p.page.locator("#model-languages").inner_text() == "en → de"
