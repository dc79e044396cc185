// A model's low-confidence flag: the threshold its job calibrated on the validation pairs, and how it split them
// (model/decode/calibration.py): the share flagged and their mean chrF against the others'.

import { fmtNumber, h } from "./ui.js";

/** The overview's card; a model without a calibration (imported, denoising, too few validation pairs) says so. */
export function calibrationCard(m) {
  const c = m.confidence_calibration;
  if (m.objective !== "translation") return null;
  if (!c) {
    return h("section", { class: "card", id: "confidence-calibration" }, h("h2", {}, "Confidence"),
      h("p", { class: "muted" }, "Every translation carries a confidence; this model has no calibrated low-confidence flag (imported, or too few validation pairs)."));
  }
  const pct = (x) => `${(100 * x).toFixed(0)}%`;
  const rows = [
    ["flagged", `${pct(c.flagged_share)} of ${c.sentences} validation sentences`, `mean chrF ${c.flagged_chrf == null ? "–" : fmtNumber(c.flagged_chrf)}`],
    ["not flagged", `${pct(1 - c.flagged_share)}`, `mean chrF ${fmtNumber(c.other_chrf)}`],
  ];
  return h("section", { class: "card", id: "confidence-calibration" }, h("h2", {}, "Confidence"),
    h("p", {}, "A translation is flagged ", h("span", { class: "badge warn" }, "low confidence"),
      ` when its confidence (the geometric mean of its token probabilities) is below `, h("strong", { id: "confidence-threshold" }, fmtNumber(c.threshold)), "."),
    h("table", { class: "compact", "aria-label": "validation sentences by the flag" },
      h("tbody", {}, rows.map(([a, b, d]) => h("tr", {}, h("th", { scope: "row" }, a), h("td", {}, b), h("td", {}, d))))),
    h("p", { class: "muted" }, `Calibrated on the job's validation pairs (${c.backend}, beam ${c.beam_size}); rank correlation of confidence with chrF `,
      c.spearman == null ? "–" : fmtNumber(c.spearman), ": the closer to 1, the more the flag can be trusted."));
}

/** The flag on one translation, where the model has one. */
export function lowConfidenceBadge(tr) {
  return tr.low_confidence ? h("span", { class: "badge warn low-confidence", title: "below the model's calibrated threshold" }, "low confidence") : null;
}
