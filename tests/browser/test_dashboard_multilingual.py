"""Jobs of several language pairs in Chromium: the new-job form ticking more pairs, and the job page: every pair in its
head, each pair's dataset in the settings panel, and a chart of each validation metric with a curve a pair beside the
pairs' mean, drawn from the series a real training run recorded."""

from __future__ import annotations

import re

from model.data.demo import numbers_to_words_task
from tests.support.client import Api, write_jsonl


def test_the_job_page_of_a_job_of_pairs_draws_each_pairs_curves_and_lists_its_datasets(page, stack, tmp_path):
    api = Api(stack.url, stack.key)
    de = api.upload(write_jsonl(tmp_path / "de.jsonl", numbers_to_words_task(200, seed=1)), "parallel",
                    languages=("en", "de"))  # fmt: skip
    fr = api.upload(write_jsonl(tmp_path / "fr.jsonl", numbers_to_words_task(60, seed=2, lang_tgt="fr")), "parallel",
                    languages=("en", "fr"))  # fmt: skip
    job = api.submit(
        {
            "objective": "translation",
            "pairs": [{"dataset_id": de["id"]}, {"dataset_id": fr["id"]}],
            "model": {"preset": "tiny"},
            "training": {
                "max_steps": 30,
                "eval_every": 10,
                "checkpoint_every": 30,
                "max_length": 40,
                "warmup_steps": 10,
                "best_pair": "en-fr",
                "best_metric": "chrf",
            },  # fmt: skip
        }
    )
    done = api.wait(job["id"], ("succeeded", "failed"), timeout=300)
    assert done["status"] == "succeeded", done["error"]

    page.sign_in()
    page.open(f"#/jobs/{job['id']}")
    head = page.page.locator("#job-summary .summary-row")
    head.wait_for()
    assert "translation en→de, en→fr" in head.inner_text()
    for metric in ("bleu", "chrf", "valid_loss"):
        chart = page.page.locator(f'figure[data-chart="pair-{metric.replace("valid_", "")}"]')
        assert chart.get_attribute("data-series") == f"{metric}/en-de {metric}/en-fr {metric}"
        for name in (f"{metric}/en-de", f"{metric}/en-fr", metric):
            page.page.wait_for_function(
                f"""() => Number(document.querySelector('figure[data-series~="{name}"]')
                         ?.getAttribute('data-points-{name.replace("/", "-")}') || 0) >= 3"""
            )  # evaluated at steps 10, 20 and 30
    legend = page.page.locator('figure[data-chart="pair-bleu"]').inner_text()
    assert "en-de" in legend and "en-fr" in legend and "mean" in legend
    checkpoint = page.page.locator("#checkpoints tbody tr").first.inner_text()
    assert "bleu" in checkpoint and "bleu/en-de" not in checkpoint  # a pair's own scores are in its charts
    page.screenshot("job-of-pairs-overview")

    page.page.get_by_role("tablist").get_by_role("tab", name="Data and settings").click()
    rows = page.page.locator("#job-pairs tbody tr")
    rows.first.wait_for()
    assert rows.count() == 2
    assert rows.nth(0).get_attribute("data-pair") == "en-de" and de["id"] in rows.nth(0).inner_text()
    assert "de.jsonl" in rows.nth(0).inner_text()  # the dataset's name beside its id
    assert "yes (chrf)" in page.page.locator('#job-pairs tr[data-pair="en-fr"]').inner_text()
    assert "temperature 5" in page.page.inner_text("#job-pairs h3")
    assert "held out of each pair" in page.page.inner_text("#config")
    page.screenshot("job-of-pairs-settings")

    # its model's page: the pairs, and the playground translating into the target chosen
    page.open(f"#/models/{done['model_id']}")
    assert page.page.locator("#model-languages").inner_text() == "en → de, en → fr"
    page.open(f"#/models/{done['model_id']}/playground")
    target = page.page.locator("#translate-target")
    assert target.locator("option").all_inner_texts() == ["de", "fr"]
    target.select_option("fr")
    page.page.locator("#translate-text").fill("forty two")
    with page.page.expect_request(lambda r: r.url.endswith("/translate") and r.method == "POST") as sent:
        page.page.get_by_role("button", name="Translate", exact=True).click()
    assert sent.value.post_data_json["target_language"] == "fr"
    page.page.locator("#translate-backend-used .target-note").wait_for()
    assert "into fr" in page.page.inner_text("#translate-backend-used")
    assert page.page.locator("#translate-file-target option").all_inner_texts() == ["de", "fr"]
    page.screenshot("model-of-pairs-playground")
    page.open(f"#/models/{done['model_id']}/evaluations")
    options = page.page.locator("#evaluate-target option").all_inner_texts()
    assert options == ["the test set's pair", "de", "fr"]


def test_the_new_job_form_ticks_more_pairs_into_a_job_of_several(page, stack, tmp_path):
    """The new-job form offers the other parallel datasets that declare their languages; ticking one submits
    `pairs` (the training dataset first) with the temperature given, and hides the job's own languages."""
    api = Api(stack.url, stack.key)
    de = api.upload(write_jsonl(tmp_path / "form-de.jsonl", numbers_to_words_task(40, seed=3)), "parallel",
                    languages=("en", "de"))  # fmt: skip
    fr = api.upload(write_jsonl(tmp_path / "form-fr.jsonl", numbers_to_words_task(30, seed=4, lang_tgt="fr")),
                    "parallel", languages=("en", "fr"))  # fmt: skip
    plain = api.upload(write_jsonl(tmp_path / "form-plain.jsonl", numbers_to_words_task(30, seed=5)), "parallel")

    page.sign_in()
    page.open("#/new")
    page.page.locator(f'#dataset option[value="{de["id"]}"]').wait_for(state="attached")
    page.page.locator("#dataset").select_option(de["id"])
    picker = page.page.locator("#pairs-picker")
    picker.locator("summary").click()
    box = page.page.locator(f"#pair-{fr['id']}")
    assert box.get_attribute("data-pair") == "en-fr" and "en → fr: form-fr.jsonl" in picker.inner_text()
    assert page.page.locator(f"#pair-{de['id']}").count() == 0  # the training dataset is the first pair already
    assert page.page.locator(f"#pair-{plain['id']}").count() == 0  # no declared languages: no pair
    assert page.page.locator("#pair-temperature").is_hidden()
    box.check()
    assert "1 ticked, 2 pairs in all" in picker.locator("summary").inner_text()
    assert page.page.locator("#new-job-source-language").is_hidden()  # each pair's languages are its dataset's
    page.page.locator("#pair-temperature").fill("2")
    page.page.locator("#max_steps").fill("3")
    page.screenshot("new-job-of-pairs")
    page.page.locator("#sweep-button").click()  # a sweep of such jobs may follow one pair's metric
    options = page.page.locator("#sweep-metric option").evaluate_all("options => options.map(o => o.value)")
    assert {"bleu", "bleu/en-de", "bleu/en-fr", "chrf/en-fr", "valid_loss/en-de"} <= set(options)
    page.page.locator("#close-sweep").click()
    with page.page.expect_request(lambda r: r.url.endswith("/v1/jobs") and r.method == "POST") as sent:
        page.page.locator("#submit-job").click()
    body = sent.value.post_data_json
    assert body["pairs"] == [{"dataset_id": de["id"]}, {"dataset_id": fr["id"]}] and "dataset_id" not in body
    assert body["training"]["pair_temperature"] == 2
    page.page.wait_for_url(re.compile(r"#/jobs/[0-9a-f-]+$"))
    job = api.job(page.page.url.rsplit("/", 1)[1])
    assert [(p["source_language"], p["target_language"]) for p in job["pairs"]] == [("en", "de"), ("en", "fr")]
    assert job["training"]["pair_temperature"] == 2
    assert api.wait(job["id"], ("succeeded", "failed"), timeout=300)["status"] == "succeeded"
