// The "Clean" form of a dataset's page: the filter rules (docs/data.md, "Filters") as switches and numbers, prefilled
// from the report (a problem that occurs is ticked), beside what the report says each rule would remove: an
// estimate, since the rules overlap and a row is removed once. Submitting makes a new dataset
// (POST /v1/datasets/{id}/filter) and opens its page.

import { api } from "./api.js";
import { pct } from "./datareport.js";
import { errorBox, fmtNumber, h } from "./ui.js";

const RATIO_BOUND = 3;  // the report's ratio_outliers bound when it does not say

/** The rules in the filters' order. `numbers`: [name, label, attributes]; `problems`: what the report counts. */
const RULES = [
  { key: "drop_empty", label: "Drop pairs with an empty side", problems: ["empty"] },
  { key: "drop_invalid_characters", label: "Drop pairs with invalid characters", problems: ["invalid_characters"] },
  { key: "length", label: "Limit the length (words, each side)",
    numbers: [["min_length", "at least", { min: 0, step: 1, required: false }],
              ["max_length", "at most", { min: 1, step: 1, required: false }]] },
  { key: "max_ratio", label: "Drop length-ratio outliers", problems: ["ratio_outliers"],
    numbers: [["max_ratio", "longer/shorter at least", { min: 1.01, step: "any" }]] },
  { key: "deduplicate", label: "Remove duplicates (keep the first)", problems: ["duplicates"] },
  { key: "drop_copies", label: "Drop copies (target = source)", problems: ["copies"] },
  { key: "drop_placeholder_mismatches", label: "Drop placeholder mismatches", problems: ["placeholder_mismatches"] },
  { key: "drop_wrong_language", label: "Drop sides in another language",
    problems: ["wrong_language_source", "wrong_language_target"],
    numbers: [["language_odds", "odds", { min: 1.01, step: "any" }], ["language_min_chars", "judge from characters", { min: 1, step: 1 }]] },
  { key: "drop_misaligned", label: "Drop misaligned pairs", problems: ["misaligned"] },
];

/** Rows surely and perhaps outside [min, max] of one side's word histogram (a bin across a bound: perhaps). */
function outsideLengths({ edges, counts, above }, min, max) {
  let sure = 0, maybe = 0;
  counts.forEach((count, i) => {
    const lo = edges[i], hi = edges[i + 1] - 1;  // the integer lengths of bin i
    if ((min !== null && hi < min) || (max !== null && lo > max)) sure += count;
    else if ((min !== null && lo < min) || (max !== null && hi > max)) maybe += count;
  });
  if (above && max !== null) { if (edges[edges.length - 1] > max) sure += above; else maybe += above; }
  return { sure, maybe };
}

/** Pairs surely and perhaps at a ratio of `bound` or more either way, by the ratio histogram (target/source). */
function outsideRatio({ edges, counts, below, above }, bound) {
  let sure = 0, maybe = 0;
  counts.forEach((count, i) => {
    if (edges[i] >= bound || edges[i + 1] <= 1 / bound) sure += count;
    else if (edges[i + 1] > bound || edges[i] < 1 / bound) maybe += count;
  });
  const far = edges[edges.length - 1];  // 8: below holds < 1/8, above >= 8
  if (bound <= far) sure += below + above; else maybe += below + above;
  return { sure, maybe };
}

/** What the report says `rule` would remove with the form's `values`: {low, high, note} rows, or null. */
function estimate(rule, values, report) {
  const problems = report.problems;
  // What a rule removes of a problem: its estimate, except for misaligned pairs, whose estimate corrects the pairs
  // counted (for the threshold's recall and short wrong-language sides) where the filter removes those counted.
  const removes = (p, n) => (n === "misaligned" && p ? (p.sampled ? Math.round(p.share * report.rows) : p.count) : p?.estimated ?? 0);
  const counted = (names) => names.reduce((a, n) => a + removes(problems[n], n), 0);
  if (rule.key === "length") {
    const min = values.min_length, max = values.max_length;
    if (min === null && max === null) return null;
    const sides = Object.values(report.sides).map((side) => outsideLengths(side.words.histogram, min, max));
    return { low: Math.max(...sides.map((o) => o.sure)),
             high: Math.min(report.rows, sides.reduce((a, o) => a + o.sure + o.maybe, 0)),
             note: "by the word histograms" };
  }
  if (rule.key === "max_ratio") {
    const bound = problems.ratio_outliers?.bound ?? RATIO_BOUND;
    if (values.max_ratio === null) return null;
    if (Math.abs(values.max_ratio - bound) < 1e-9) return { low: counted(rule.problems), high: counted(rule.problems) };
    const o = outsideRatio(report.length_ratio.histogram, values.max_ratio);
    return { low: 0, high: o.sure + o.maybe, note: "by the ratio histogram, short pairs included" };
  }
  if (rule.key === "drop_wrong_language" && (values.language_odds !== 10 || values.language_min_chars !== 20)) {
    return { low: null, high: null, note: `the report counted ${fmtNumber(counted(rule.problems))} at odds 10 from 20 characters` };
  }
  const n = counted(rule.problems);
  return { low: n, high: n };
}

function estimateText(e, rows) {
  if (!e) return "";
  if (e.low === null) return e.note;
  const range = e.low === e.high ? fmtNumber(e.low) : `${fmtNumber(e.low)}–${fmtNumber(e.high)}`;
  return `≈ ${range} ${e.high === 1 ? "row" : "rows"} (${pct(e.high / (rows || 1))})${e.note ? `, ${e.note}` : ""}`;
}

/** The rules' starting values from the report: a problem that occurs is ticked. */
function prefill(report, dataset) {
  const occurs = (names) => names.some((n) => report.problems[n]?.count > 0);
  const longest = Math.max(...Object.values(report.sides).map((side) => side.words.percentiles.p99));
  const declared = Boolean(dataset.source_language || dataset.target_language);
  return {
    on: Object.fromEntries(RULES.map((r) => [r.key, r.key !== "length" && occurs(r.problems || [])
      && (r.key !== "drop_wrong_language" || declared)])),
    numbers: { min_length: 1, max_length: Math.max(50, Math.ceil((2 * longest) / 10) * 10),
               max_ratio: report.problems.ratio_outliers?.bound ?? RATIO_BOUND, language_odds: 10, language_min_chars: 20 },
    declared,
  };
}

export function cleanCard(dataset, report) {
  const start = prefill(report, dataset);
  const switches = {}, numbers = {}, estimates = {};
  const rows = RULES.map((rule) => {
    const box = h("input", { type: "checkbox", role: "switch", id: `rule-${rule.key}`, checked: start.on[rule.key],
                             disabled: rule.key === "drop_wrong_language" && !start.declared });
    switches[rule.key] = box;
    const inputs = (rule.numbers || []).map(([name, label, attrs]) => {
      const input = h("input", { type: "number", id: `setting-${name}`, value: start.numbers[name], required: true, ...attrs });
      numbers[name] = input;
      return h("label", { class: "rule-number", for: input.id }, h("span", {}, label), input);
    });
    estimates[rule.key] = h("span", { class: "rule-estimate", id: `estimate-${rule.key}`, "aria-live": "polite" });
    const why = rule.key === "drop_wrong_language" && !start.declared
      ? h("small", { class: "muted" }, "The dataset declares no language: there is no wrong one to drop.") : null;
    return h("div", { class: "rule", "data-rule": rule.key },
      h("label", { class: "switch", for: box.id }, box, h("span", { class: "switch-track", "aria-hidden": "true" }), rule.label),
      h("div", { class: "rule-numbers" }, inputs), estimates[rule.key], why);
  });
  const total = h("p", { class: "clean-total", id: "clean-total", "aria-live": "polite" });
  const name = h("input", { id: "clean-name", type: "text", maxlength: 200, placeholder: `${dataset.name} (filtered)` });
  const status = h("div", { id: "clean-status", "aria-live": "polite" });
  const submit = h("button", { type: "submit", id: "clean-submit" }, "Create the cleaned dataset");

  const value = (n) => (numbers[n].value === "" ? null : Number(numbers[n].value));
  function refresh() {
    let high = 0, any = false;
    for (const rule of RULES) {
      const on = switches[rule.key].checked;
      for (const [n] of rule.numbers || []) numbers[n].disabled = !on;
      const values = Object.fromEntries(Object.keys(numbers).map((n) => [n, value(n)]));
      const e = on ? estimate(rule, values, report) : null;
      estimates[rule.key].textContent = on ? estimateText(e, report.rows) : "";
      any ||= on;
      high += e?.high ?? 0;
    }
    total.textContent = any
      ? `Together at most ${fmtNumber(Math.min(high, report.rows))} of ${fmtNumber(report.rows)} rows ` +
        "(an estimate from the report: a row with several problems is removed once, under the first rule)."
      : "No rule is on: turn one on to clean.";
    submit.disabled = !any;
  }

  function body() {
    const rules = {};
    for (const rule of RULES) {
      if (!switches[rule.key].checked) continue;
      if (rule.numbers) for (const [n] of rule.numbers) if (value(n) !== null) rules[n] = value(n);
      if (rule.key !== "length" && rule.key !== "max_ratio") rules[rule.key] = true;
    }
    return name.value.trim() ? { name: name.value.trim(), rules } : { rules };
  }

  const form = h("form", { class: "clean-form", "aria-labelledby": "clean-title" },
    h("div", { class: "rules" }, rows), total, h("div", { class: "inline" },
      h("div", { class: "field" }, h("label", { for: name.id }, "Name of the new dataset"), name), submit), status);
  form.addEventListener("input", refresh);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    status.replaceChildren();
    submit.disabled = true;
    try {
      const made = await api(`/v1/datasets/${dataset.id}/filter`, { method: "POST", json: body() });
      location.hash = `#/datasets/${made.id}`;
    } catch (err) {
      status.append(errorBox(`The dataset was not cleaned: ${err.message}`));
      submit.disabled = false;
    }
  });
  refresh();
  return h("section", { class: "card", id: "dataset-clean", "aria-labelledby": "clean-title" },
    h("h2", { id: "clean-title" }, "Clean"),
    h("p", { class: "muted small-note" }, "Make a new dataset of the rows these rules keep; this one stays as it is. Rules apply in ",
      "this order and each removed row counts under the first rule that removed it. Beside each rule, what the report ",
      "counted: an estimate of what it removes."),
    form);
}
