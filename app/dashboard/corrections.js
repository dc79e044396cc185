// Learning from corrections: in the playground, each translation can be corrected (POST /v1/models/{id}/corrections);
// the model's "Corrections" panel lists them (GET …/corrections, delete one) and adapts the model to them
// (POST …/adaptations): a job fine-tuning it on the corrections mixed with its original data, whose model is the
// next version of its name.

import { api } from "./api.js";
import { clear, errorBox, field, fmtTime, h, shortId } from "./ui.js";

/** Under one translation in the playground: "Correct", which opens a field prefilled with it and sends the fix. */
export function correctAction(modelId, source, translation) {
  const box = h("div", { class: "correction" });
  const open = h("button", { type: "button", class: "small correct-open" }, "Correct");
  open.addEventListener("click", () => {
    const text = h("input", { class: "correct-text", value: translation, size: 60, "aria-label": "corrected translation" });
    const send = h("button", { type: "submit", class: "small" }, "Send correction");
    const status = h("span", { class: "muted correct-status", "aria-live": "polite" });
    const form = h("form", { class: "inline-form correct-form" }, text, send, status);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      send.disabled = true;
      try {
        await api(`/v1/models/${modelId}/corrections`, { method: "POST",
          json: { source, translation, corrected: text.value.trim() } });
        clear(box, h("span", { class: "badge ok correct-saved" }, "correction saved"));
      } catch (err) {
        status.replaceChildren(errorBox(err.message));
        send.disabled = false;
      }
    });
    clear(box, form);
    text.focus();
  });
  return clear(box, open);
}

function adaptForm(m, total, out) {
  const minutes = h("input", { id: "adapt-minutes", type: "number", min: 0.5, max: 1440, step: 0.5, value: 2, size: 6 });
  const share = h("input", { id: "adapt-share", type: "number", min: 0.05, max: 0.95, step: 0.05, value: 0.25, size: 6 });
  const name = h("input", { id: "adapt-name", maxlength: 64, value: m.name ?? "", placeholder: "registry name", required: !m.name });
  const button = h("button", { type: "submit", id: "adapt-start", disabled: !total }, "Adapt");
  share.title = "of the training rows; the rest: the original data";
  const form = h("form", { class: "inline-form adapt-form", id: "adapt-form" },
    field("Minutes", minutes), field("Corrections' share", share), field("Publish as", name), button);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    button.disabled = true;
    out.replaceChildren(h("p", { class: "muted" }, "Submitting…"));
    try {
      const a = await api(`/v1/models/${m.id}/adaptations`, { method: "POST", json: { max_minutes: Number(minutes.value),
        mix_share: Number(share.value), ...(name.value.trim() ? { register_as: name.value.trim() } : {}) } });
      clear(out, h("p", { id: "adapt-result" }, `Adapting to ${a.corrections} correction${a.corrections === 1 ? "" : "s"}: `,
        h("a", { href: `#/jobs/${a.job_id}` }, `job ${shortId(a.job_id)}`), `, which publishes the next version of ${a.register_as}; `,
        h("a", { href: `#/datasets/${a.dataset_id}` }, "the corrections as a dataset"), "."));
    } catch (err) {
      out.replaceChildren(errorBox(err.message));
    } finally {
      button.disabled = !total;
    }
  });
  return form;
}

function correctionRow(m, c, reload) {
  const remove = h("button", { type: "button", class: "danger small correction-delete", title: "sent by mistake" }, "Delete");
  remove.addEventListener("click", async () => {
    remove.disabled = true;
    try {
      await api(`/v1/models/${m.id}/corrections/${c.id}`, { method: "DELETE" });
      reload();
    } catch (err) {
      remove.replaceWith(errorBox(err.message));
    }
  });
  return h("tr", {}, h("td", {}, c.source), h("td", { class: "muted" }, c.translation || "–"),
    h("td", { class: "corrected" }, c.corrected), h("td", { class: "muted" }, fmtTime(c.created_at)), h("td", {}, remove));
}

/** The model's Corrections panel: the latest corrections and the adaptation form. */
export function correctionsPanel(m, signal) {
  const section = h("section", { class: "card", id: "corrections" }, h("h2", {}, "Corrections"), h("p", { class: "muted" }, "Loading…"));
  const out = h("div", { id: "adapt-out", "aria-live": "polite" });
  const load = async () => {
    try {
      const page = await api(`/v1/models/${m.id}/corrections?limit=100`, { signal });
      const lead = h("p", {}, h("strong", { id: "corrections-total" }, String(page.total)),
        ` correction${page.total === 1 ? "" : "s"} of this model's translations. Adapting fine-tunes it on them (and on its ancestors'),`,
        " mixed with its original training data so it does not forget, and publishes the result as the next version of its name.");
      const table = page.data.length ? h("div", { class: "scroll-x" }, h("table", { class: "compact", id: "corrections-table" },
        h("thead", {}, h("tr", {}, ["source", "given", "corrected", "sent", ""].map((t) => h("th", {}, t)))),
        h("tbody", {}, page.data.map((c) => correctionRow(m, c, load))))) :
        h("p", { class: "muted" }, "None yet: correct a translation in the Translate tab, or POST /v1/models/{id}/corrections.");
      clear(section, h("h2", {}, "Corrections"), lead, adaptForm(m, page.total, out), out, table);
    } catch (err) {
      if (err.name !== "AbortError") clear(section, h("h2", {}, "Corrections"), errorBox(err.message));
    }
  };
  load();
  return section;
}
