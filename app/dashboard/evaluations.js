// A model's evaluations: scores on test sets (sacrebleu BLEU, chrF, chrF++ with their signatures), a form to
// ask for one, live progress while an inference worker translates, and the hypotheses to download.

import { api, download } from "./api.js";
import { targetField, targetNote } from "./targets.js";
import { backendName, errorBox, field, fmtTime, h, progressBar, shortId, statusBadge } from "./ui.js";

const TOKENIZERS = ["13a", "intl", "zh", "char", "none", "ja-mecab", "ko-mecab", "flores101", "flores200"];

function score(e, name) {
  const s = e.scores?.[name];
  return s ? h("span", { title: s.signature }, s.score.toFixed(2)) : "–";
}

// The model's low-confidence flag on this test set: the share it flags, their mean chrF against the others'.
function flagged(e) {
  const c = e.scores?.confidence;
  if (!c || c.threshold == null) return "–";
  const chrf = (x) => (x == null ? "–" : x.toFixed(1));
  return h("span", { class: "flagged", title: `confidence below ${c.threshold.toFixed(3)}; rank correlation with chrF ${c.spearman?.toFixed(2) ?? "–"}` },
    `${(100 * c.flagged_share).toFixed(0)}% (chrF ${chrf(c.flagged_chrf)} vs ${chrf(c.other_chrf)})`);
}

function row(e) {
  const over = e.status === "succeeded" || e.status === "failed";
  const hyp = e.hypotheses_url ? h("button", { type: "button", class: "small-link" }, "hypotheses") : null;
  hyp?.addEventListener("click", () => download(e.hypotheses_url).catch((err) => hyp.replaceWith(errorBox(err.message))));
  return h("tr", { "data-evaluation": e.id },
    h("td", { "data-label": "Test set" }, e.dataset_id ? shortId(e.dataset_id) : "deleted", e.job_id ? h("small", { class: "muted" }, " (its job's)") : null,
      targetNote(e)),
    h("td", { "data-label": "Status" }, over ? statusBadge(e.status) : progressBar(e.progress, `${e.translated}/${e.sentences}`),
      e.error ? h("small", { class: "error" }, ` ${e.error}`) : null),
    h("td", { "data-label": "BLEU" }, score(e, "bleu")),
    h("td", { "data-label": "chrF" }, score(e, "chrf")),
    h("td", { "data-label": "chrF++" }, score(e, "chrf++")),
    h("td", { "data-label": "Low confidence" }, flagged(e)),
    h("td", { "data-label": "Settings" }, `beam ${e.settings.beam_size}, alpha ${e.settings.alpha}, tok ${e.settings.tokenize}` + (e.backend ? `, ${backendName(e.backend)}` : "")),
    h("td", { "data-label": "Created" }, fmtTime(e.created_at)),
    h("td", {}, hyp));
}

export function evaluationsPanel(modelId, signal, pairs = null, beamSize = null) {
  const target = targetField(pairs, "evaluate-target", "the test set's pair");
  const table = h("div", { id: "evaluations-table" }, h("p", { class: "muted" }, "Loading…"));
  const out = h("div", { id: "evaluate-status", "aria-live": "polite" });
  const dataset = h("select", { id: "evaluate-dataset", required: true });
  const beam = h("input", { id: "evaluate-beam", type: "number", min: 1, max: 16, value: beamSize ?? 4 });
  const alpha = h("input", { id: "evaluate-alpha", type: "number", min: 0, max: 2, step: 0.05, value: 0.6, required: true,
    title: "GNMT length penalty exponent: 0 favours short translations, higher values longer ones" });
  const tokenize = h("select", { id: "evaluate-tokenize" }, TOKENIZERS.map((t) => h("option", { value: t }, t)));
  const button = h("button", { type: "submit" }, "Evaluate");
  const form = h("form", { class: "inline-form", id: "evaluate-form" },
    field("Test set (parallel)", dataset), target.el, field("Beam", beam), field("Length penalty (alpha)", alpha),
    field("BLEU tokenizer", tokenize), button);
  let timer = null;

  async function refresh() {
    clearTimeout(timer);
    try {
      const page = await api(`/v1/models/${modelId}/evaluations?limit=50`, { signal });
      table.replaceChildren(page.data.length ? h("table", {},
        h("thead", {}, h("tr", {}, ["Test set", "Status", "BLEU", "chrF", "chrF++", "Low confidence", "Settings", "Created", ""].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, page.data.map((e) => row(e)))) : h("p", { class: "muted" }, "Not evaluated yet."));
      if (page.data.some((e) => e.status === "queued" || e.status === "running")) timer = setTimeout(refresh, 1000);
    } catch (err) {
      if (err.name !== "AbortError") table.replaceChildren(errorBox(err.message));
    }
  }
  signal.addEventListener("abort", () => clearTimeout(timer));

  api("/v1/datasets?limit=500", { signal }).then((page) => {
    const parallel = page.data.filter((d) => d.kind === "parallel");
    dataset.replaceChildren(...parallel.map((d) => h("option", { value: d.id }, `${d.name} (${d.rows} rows, ${shortId(d.id)})`)));
    if (!parallel.length) out.replaceChildren(h("p", { class: "muted" }, "Upload a parallel dataset to evaluate on."));
  }).catch((err) => { if (err.name !== "AbortError") out.replaceChildren(errorBox(err.message)); });

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    button.disabled = true;
    out.replaceChildren();
    try {
      await api(`/v1/models/${modelId}/evaluations`, { method: "POST",
        json: { dataset_id: dataset.value, beam_size: Number(beam.value), alpha: Number(alpha.value), tokenize: tokenize.value,
                ...(target.value() ? { target_language: target.value() } : {}) } });
      await refresh();
    } catch (err) {
      out.replaceChildren(errorBox(err.message));
    } finally {
      button.disabled = false;
    }
  });
  refresh();
  return h("section", { class: "card", id: "evaluations" }, h("h2", {}, "Evaluations"),
    h("p", { class: "muted" }, "Translate a test set and score it with sacrebleu; hover a score for its signature."),
    form, out, table);
}
