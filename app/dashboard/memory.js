// Memory of one training step on the job page (GET /v1/jobs/{id}/memory): what the worker measured before the
// first update (weights, gradients, Adam moments, saved activations, temporary buffers, the peak) beside the
// estimate of POST /v1/estimate for the same batch, as bars per kind, then the activations by component and the
// differences the server computed.
import { api } from "./api.js";
import { bars } from "./charts.js";
import { h, clear, errorBox, fmtBytes } from "./ui.js";

const ESTIMATE_COLOR = "#94a3b8";
const POLL_MS = 10_000;
const ACTIVATIONS = {
  attention_scores: "attention scores",
  attention_softmax: "attention softmax",
  ffn_hidden: "FFN hidden",
  logits: "logits",
  other: "other",
};

const sum = (values) => values.reduce((a, v) => a + v, 0);

/** [kind, measured bytes, estimated bytes] rows; the estimate's autocast copy is what its total holds beyond the rest. */
export function kindRows(measured, estimated) {
  const k = measured.by_kind, e = estimated;
  const activations = sum(Object.values(k.activations));
  const copy = e.training_total_bytes - e.weights_bytes - e.gradients_bytes - e.adam_bytes - e.activations_bytes;
  return [
    ["weights", k.weights, e.weights_bytes],
    ["gradients", k.gradients, e.gradients_bytes],
    ["Adam moments", k.adam_moments, e.adam_bytes],
    ["autocast weights", k.autocast_weights, copy],
    ["activations", activations, e.activations_bytes],
    ["temporary", k.temporary, 0],
    ["peak", measured.peak_bytes, e.training_total_bytes],
  ];
}

function sideBySide(rows) {
  const items = rows.flatMap(([kind, m, e]) => [
    { label: `${kind} · measured`, value: m, text: fmtBytes(m) },
    { label: `${kind} · estimated`, value: e, text: fmtBytes(e) },
  ]);
  const chart = bars(items, { ariaLabel: "measured and estimated bytes per kind" });
  chart.querySelectorAll(".bar-row").forEach((row, i) => {
    row.dataset.kind = rows[Math.floor(i / 2)][0];
    row.dataset.side = i % 2 ? "estimated" : "measured";
    if (i % 2) row.querySelector(".bar-fill").style.background = ESTIMATE_COLOR;
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
  const b = m.batch;
  clear(body,
    h("p", { class: "muted" },
      `${m.device}, ${m.precision}: ${b.sentences} sentences of ${b.source_length} source and ${b.target_length} target ` +
      `tokens (${b.padded_tokens.toLocaleString("en-US")} padded tokens of max_tokens_per_batch ` +
      `${m.tokens_per_batch.toLocaleString("en-US")}); peak ${fmtBytes(m.peak_bytes)}, measured in ${m.seconds.toFixed(1)} s.`),
    sideBySide(kindRows(m, report.estimated)),
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
    h("p", { class: "muted" }, "What an update holds until its gradient comes back, measured on the job's first batch " +
      "(grey: the estimate shown before the job ran)."),
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
