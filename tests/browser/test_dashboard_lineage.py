"""A model's page names the model it started from: "cut from" with the layers it kept when its job started from
fewer of the parent's layers (shrink and fine-tune), "fine-tuned from" when it kept them all. Rows are written
straight into the service's database, as a finished job leaves them (the e2e tests make a cut model for real)."""

from __future__ import annotations

from model.nn.config import ModelConfig
from tests.browser.support import api, model_rows, service_database


def test_a_cut_model_names_the_layers_it_kept_and_a_fine_tuned_one_its_parent(page, stack):
    parent, cut, whole = model_rows(stack, 3)
    with service_database(stack) as session:
        from app.db.tables import TrainedModel

        configs = {parent: (6, 3), cut: (3, 1), whole: (6, 3)}
        for model_id, (n_encoder, n_decoder) in configs.items():
            row = session.get(TrainedModel, model_id)
            row.config = ModelConfig.from_preset(
                "tiny", 489, n_encoder_layers=n_encoder, n_decoder_layers=n_decoder
            ).to_dict()
            row.parent_model_id = None if model_id == parent else parent
    http = api(stack)
    assert http.get(f"/v1/models/{cut}").json()["cut_from"] == {
        "encoder": [0, 2, 5], "decoder": [0], "encoder_of": 6, "decoder_of": 3
    }  # fmt: skip
    page.sign_in()
    page.open(f"#/models/{cut}")
    page.page.locator("#kept-layers").wait_for()
    summary = page.page.locator(".inline-kv").first.inner_text()
    assert "cut from" in summary and "fine-tuned from" not in summary
    assert page.page.locator("#parent-model").get_attribute("href") == f"#/models/{parent}"
    assert page.page.locator("#kept-layers").inner_text().strip() == (
        "keeping encoder layers 0, 2, 5 of 6 and decoder layer 0 of 3"
    )
    page.screenshot("model-cut-from")
    page.open(f"#/models/{whole}")
    page.page.locator(".inline-kv dt", has_text="fine-tuned from").wait_for()
    assert page.page.locator("#kept-layers").count() == 0
    assert page.page.locator("#parent-model").get_attribute("href") == f"#/models/{parent}"
