"""A translation model's default beam on its page: set on the registry card, what the playground, the file
translation and the evaluation forms start from."""

from __future__ import annotations

from playwright.sync_api import expect

from bench.harness.stack import wait_for
from tests.browser.support import api, model_rows, tab


def test_the_registry_card_sets_the_default_beam_the_beam_fields_start_from(page, stack):
    (model_id,) = model_rows(stack, 1)
    http = api(stack)
    p = page
    p.sign_in()
    p.open(f"#/models/{model_id}")
    beam = p.page.locator("#model-beam-size")
    beam.wait_for()
    assert beam.input_value() == "" and beam.get_attribute("placeholder") == "4"
    tab(p, "Translate").click()
    expect(p.page.locator("#beam-size")).to_have_value("4")  # mounted before the default changes
    expect(p.page.locator("#n-best")).to_have_value("3")
    tab(p, "Overview").click()
    beam.fill("1")
    p.page.get_by_role("button", name="Save", exact=True).click()
    wait_for(lambda: http.get(f"/v1/models/{model_id}").json()["beam_size"] == 1, 10, "the default beam saved")
    expect(p.page.locator("#model-beam-size")).to_have_value("1")  # the card drawn again from the saved model
    p.screenshot("model-default-beam")
    tab(p, "Translate").click()
    expect(p.page.locator("#beam-size")).to_have_value("1")  # the panel shown before follows
    expect(p.page.locator("#n-best")).to_have_value("1")  # no more hypotheses than the beam holds
    expect(p.page.locator("#translate-beam")).to_have_value("1")
    tab(p, "Evaluations").click()  # mounted now: starts from it
    expect(p.page.locator("#evaluate-beam")).to_have_value("1")
    tab(p, "Overview").click()
    p.page.locator("#model-beam-size").fill("")
    p.page.get_by_role("button", name="Save", exact=True).click()
    wait_for(lambda: http.get(f"/v1/models/{model_id}").json()["beam_size"] is None, 10, "the default beam cleared")
    tab(p, "Evaluations").click()
    expect(p.page.locator("#evaluate-beam")).to_have_value("4")
