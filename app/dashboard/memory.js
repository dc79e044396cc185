// Memory of one training step on the job page (GET /v1/jobs/{id}/memory): what the worker measured before the
// first update (weights, gradients, Adam moments, saved activations, temporary buffers, the peak) beside
// model/probes/anatomy.py's estimate for the measured batch and the estimate POST /v1/estimate gives for the job's settings
// (max_tokens_per_batch, precision), as bars per kind, then the activations by component and the differences the
// server computed.
import { api } from "./api.js";
import { bars } from "./charts.js";
import { h, clear, errorBox, fmtBytes } from "./ui.js";

const SIDES = [  // [data-side, bar colour (null: the chart's own), label]
  ["measured", null, "measured"],
  ["estimated-batch", "#94a3b8", "batch estimate"],
  ["estimated-settings", "#cbd5e1", "settings estimate"],
];
const POLL_MS = 10_000;
const ACTIVATIONS = {
  attention_scores: "attention scores",
  attention_softmax: "attention softmax",
  ffn_hidden: "FFN hidden",
  logits: "logits",
  other: "other",
};

const sum = (values) => values.reduce((a, v) => a + v, 0);

/** The estimate's bytes per kind; its autocast copy is what its total holds beyond the rest. */
function estimateKinds(e) {
  if (!e) return null;
  const copy = e.training_total_bytes - e.weights_bytes - e.gradients_bytes - e.adam_bytes - e.activations_bytes;
  return [e.weights_bytes, e.gradients_bytes, e.adam_bytes, copy, e.activations_bytes, 0, e.training_total_bytes];
}

/** [kind, measured bytes, estimated bytes for the batch, estimated bytes for the job's settings (null: not stored)]. */
export function kindRows(measured, forBatch, forSettings) {
  const k = measured.by_kind;
  const values = [k.weights, k.gradients, k.adam_moments, k.autocast_weights, sum(Object.values(k.activations)),
    k.temporary, measured.peak_bytes];
  const batch = estimateKinds(forBatch), settings = estimateKinds(forSettings);
  return ["weights", "gradients", "Adam moments", "autocast weights", "activations", "temporary", "peak"]
    .map((kind, i) => [kind, values[i], batch ? batch[i] : null, settings ? settings[i] : null]);
}

function sideBySide(rows) {
  const items = [], meta = [];
  for (const [kind, ...values] of rows) {
    SIDES.forEach(([side, color, label], i) => {
      if (values[i] === null) return;
      items.push({ label: `${kind} · ${label}`, value: values[i], text: fmtBytes(values[i]) });
      meta.push({ kind, side, color });
    });
  }
  const chart = bars(items, { ariaLabel: "measured and estimated bytes per kind" });
  chart.querySelectorAll(".bar-row").forEach((row, i) => {
    row.dataset.kind = meta[i].kind;
    row.dataset.side = meta[i].side;
    if (meta[i].color) row.querySelector(".bar-fill").style.background = meta[i].color;
  });
  return chart;
}

function render(body, report) {
  const m = report.measured;
  if (!m) {
    clear(body, report.error
      ? errorBox(`The measurement failed (the job trained on): ${report.error}`)
      : h("p", { class: "muted", id: "memory-empty" }, "Not measured yet: the worker measures one step before the first update."));
    return;
  }
  const b = m.batch, fmt = (n) => n.toLocaleString("en-US");
  clear(body,
    h("p", { class: "muted" },
      `${m.device}, ${m.precision}: ${b.sentences} sentences of ${b.source_length} source and ${b.target_length} target ` +
      `tokens (${fmt(b.padded_tokens)} padded tokens of max_tokens_per_batch ` +
      `${fmt(m.tokens_per_batch)}); peak ${fmtBytes(m.peak_bytes)}, measured in ${m.seconds.toFixed(1)} s.`),
    h("p", { class: "muted", id: "memory-legend" },
      `Batch estimate (dark grey): model/probes/anatomy.py's estimate for this batch's ${fmt(b.padded_tokens)} padded tokens in ${m.precision}` +
      (report.estimated
        ? `; settings estimate (light grey): what POST /v1/estimate gives for the job's settings, ${fmt(m.tokens_per_batch)} tokens per batch in ${m.precision}.`
        : " (the estimate for the job's settings was not stored with this measurement).")),
    sideBySide(kindRows(m, report.estimated_for_batch, report.estimated)),
    h("h3", {}, "Saved activations by component (measured)"),
    bars(Object.entries(ACTIVATIONS).map(([key, label]) => ({ label, value: m.by_kind.activations[key],
      text: fmtBytes(m.by_kind.activations[key]) })), { ariaLabel: "saved activations by component" }),
    h("h3", {}, "Differences"),
    h("ul", { id: "memory-differences" }, report.differences.map((d) => h("li", {}, d))));
}

/** The card; polls every 10 s while nothing is measured yet and the job is live(), and once after it ends. */
export function memoryCard(jobId, { signal, live = () => false } = {}) {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const section = h("section", { class: "card", id: "memory" },
    h("h2", {}, "Memory of one training step"),
    h("p", { class: "muted" }, "What an update holds until its gradient comes back, measured on the job's first batch."),
    body);
  let done = false;

  async function load() {
    try {
      const report = await api(`/v1/jobs/${jobId}/memory`, { signal });
      done = Boolean(report.measured || report.error);
      render(body, report);
    } catch (err) {
      if (err.name !== "AbortError") clear(body, errorBox(`Could not load the memory report: ${err.message}`));
    }
  }

  load();
  const timer = setInterval(() => {  // until measured, and once more after the job ends
    if (done) { clearInterval(timer); return; }
    if (!live()) clearInterval(timer);
    load();
  }, POLL_MS);
  signal?.addEventListener("abort", () => clearInterval(timer));
  return section;
}
