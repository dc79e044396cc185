// Translate a file on a model's page: upload a text file, watch the progress, download the translated file
// (same lines, blank lines and spacing).

import { api, download } from "./api.js";
import { targetField, targetNote } from "./targets.js";
import { backendName, errorBox, field, h, progressBar } from "./ui.js";

export function fileTranslationPanel(modelId, signal, pairs = null, beamSize = null) {
  const target = targetField(pairs, "translate-file-target");
  const file = h("input", { id: "translate-file", type: "file", accept: ".txt,text/plain" });
  const language = h("input", { id: "translate-language", type: "text", value: "en", minlength: 2, maxlength: 20,
    size: 6, spellcheck: "false", title: "the source's language code (en, de, fr, ...): sentences are split by its rules" });
  const beam = h("input", { id: "translate-beam", type: "number", min: 1, max: 16, value: beamSize ?? 4 });
  const out = h("div", { id: "file-translation-status", "aria-live": "polite" });
  const button = h("button", { type: "button", id: "translate-file-button", class: "secondary" }, "Translate file");
  let timer = null;
  signal.addEventListener("abort", () => clearTimeout(timer));

  function show(row) {
    if (row.status === "succeeded") {
      const link = h("button", { type: "button", id: "file-translation-download" }, `Download (${row.lines} lines)`);
      link.addEventListener("click", () => download(row.result_url).catch((err) => out.replaceChildren(errorBox(err.message))));
      const how = `${row.settings.language}, beam ${row.settings.beam_size}`;
      const by = row.backend ? ` by ${backendName(row.backend)}` : "";
      out.replaceChildren(h("p", { class: "ok" }, `Translated ${row.filename} (${how})${by}`, targetNote(row),
        `: ${row.sentences} sentences. `), link);
    } else if (row.status === "failed") {
      out.replaceChildren(errorBox(`Not translated: ${row.error}`));
    } else {
      out.replaceChildren(progressBar(row.progress, `${row.translated}/${row.sentences || "?"} sentences`));
      timer = setTimeout(() => poll(row.id), 1000);
    }
  }
  async function poll(id) {
    try {
      show(await api(`/v1/models/${modelId}/translations/${id}`, { signal }));
    } catch (err) {
      if (err.name !== "AbortError") out.replaceChildren(errorBox(err.message));
    }
  }
  button.addEventListener("click", async () => {
    clearTimeout(timer);
    if (!file.files.length) { out.replaceChildren(errorBox("Choose a text file.")); return; }
    const form = new FormData();
    form.append("file", file.files[0]);
    form.append("language", language.value.trim());
    form.append("beam_size", beam.value);
    if (target.value()) form.append("target_language", target.value());
    button.disabled = true;
    try {
      show(await api(`/v1/models/${modelId}/translations`, { method: "POST", form, signal }));
    } catch (err) {
      if (err.name !== "AbortError") out.replaceChildren(errorBox(err.message));
    } finally {
      button.disabled = false;
    }
  });
  return h("section", { class: "card", id: "file-translation" }, h("h2", {}, "Translate a file"),
    h("p", { class: "muted" }, "UTF-8 text, one segment a line: lines, blank lines and the spacing between sentences are kept."),
    h("div", { class: "inline" }, field("Text file", file), field("Source language", language), target.el, field("Beam", beam), button),
    out);
}
