// A dataset's data report (GET /v1/datasets/{id}/report, docs/data.md) as cards: the lengths of each side (characters
// or words) with their percentiles, the length ratio, the language of each side against the declared one, and each
// problem with its count, share and examples.

import { lengthHistogram, ratioHistogram } from "./histogram.js";
import { fmtNumber, h } from "./ui.js";

/** Each problem's name and what it counts (docs/data.md, "Problems"), in the report's order. */
export const PROBLEMS = {
  empty: ["Empty side", "a side is empty or whitespace only"],
  invalid_characters: ["Invalid characters", "control, unassigned, private-use or invisible format characters, U+FFFD"],
  ratio_outliers: ["Length-ratio outliers", "the longer side is 3 times the shorter or more (and 10+ characters)"],
  duplicates: ["Duplicates", "the row repeats an earlier row exactly (the extra copies)"],
  duplicate_sources: ["Same source, other target", "not a duplicate, but its source came earlier with another target"],
  copies: ["Copies", "the target is the source again (case and spaces aside)"],
  placeholder_mismatches: ["Placeholder mismatches", "%s, {0}, ${x}, <b>… differ between the sides"],
  number_mismatches: ["Number mismatches", "a number is on one side only (reported, no rule removes it)"],
  wrong_language_source: ["Source in another language", "judged another language, 10 times likelier than the declared one"],
  wrong_language_target: ["Target in another language", "judged another language, 10 times likelier than the declared one"],
  wrong_language_text: ["Text in another language", "judged another language, 10 times likelier than the declared one"],
  misaligned: ["Misaligned pairs", "the words of the two sides do not go together (a lexical model of this corpus)"],
};

export const pct = (share) => `${fmtNumber(100 * share, 3)}%`;
const EXAMPLE_CHARS = 140;  // the report cuts texts at 200; the table cuts them further, the tooltip has the rest

function cut(text) {
  if (text === undefined || text === null) return h("span", { class: "muted" }, "–");
  if (text === "") return h("span", { class: "muted empty-side" }, "(empty)");
  return h("span", { title: text.length > EXAMPLE_CHARS ? text : null },
    text.length > EXAMPLE_CHARS ? `${text.slice(0, EXAMPLE_CHARS - 1)}…` : text);
}

/** The lengths of each side, in characters or words (a toggle), as histograms with percentiles. */
function lengthsCard(report) {
  const figures = h("div", { class: "histograms" });
  const units = Object.keys(report.units);
  const draw = (unit) => figures.replaceChildren(...Object.entries(report.sides).map(([side, summary]) =>
    lengthHistogram(summary[unit], { side, unit })));
  const toggle = h("fieldset", { class: "segmented", id: "length-unit" },
    h("legend", { class: "sr-only" }, "Length unit"),
    units.map((unit, i) => h("label", {},
      h("input", { type: "radio", name: "length-unit", value: unit, id: `length-unit-${unit}`, checked: i === 0 }), unit)));
  toggle.addEventListener("change", (e) => draw(e.target.value));
  draw(units[0]);
  return h("section", { class: "card", id: "report-lengths", "aria-labelledby": "report-lengths-title" },
    h("div", { class: "card-head" }, h("h2", { id: "report-lengths-title" }, "Lengths"), toggle),
    h("p", { class: "muted small-note" }, Object.entries(report.units).map(([u, d]) => `${u}: ${d}`).join("; "),
      ". Lines mark the 5th, 50th and 95th percentiles; a paler bar at the end holds what lies past the 99th."),
    figures);
}

function ratioCard(report) {
  const ratio = report.length_ratio;
  return h("section", { class: "card", id: "report-ratio", "aria-labelledby": "report-ratio-title" },
    h("h2", { id: "report-ratio-title" }, "Length ratio"),
    h("p", { class: "muted small-note" }, `${ratio.definition} in ${ratio.unit} over ${fmtNumber(ratio.pairs)} pairs `,
      "(pairs with an empty side left out); 1 means equally long."),
    ratio.pairs ? h("div", { class: "ratio-body" }, ratioHistogram(ratio), ratioReading(ratio, report.problems.ratio_outliers))
      : h("p", { class: "muted" }, "No pair has two non-empty sides."));
}

/** The ratio's percentiles in words: how long a target is against its source. */
function ratioReading(ratio, outliers) {
  const p = ratio.percentiles;
  const times = (x) => `${fmtNumber(x, 3)}×`;
  return h("dl", { class: "kv ratio-reading" },
    h("dt", {}, "median"), h("dd", {}, `a target is ${times(p.p50)} its source`),
    h("dt", {}, "middle half"), h("dd", {}, `${times(p.p25)} to ${times(p.p75)}`),
    h("dt", {}, "90% of pairs"), h("dd", {}, `${times(p.p5)} to ${times(p.p95)}`),
    outliers ? [h("dt", {}, "outliers"), h("dd", {}, `${fmtNumber(outliers.count)} ${outliers.count === 1 ? "pair" : "pairs"} ${fmtNumber(outliers.bound)}× or more either way `,
      h("span", { class: "muted" }, `(the longer side ${outliers.min_characters}+ characters)`))] : null);
}

/** One side's detected languages against its declared one; the share in another language stands out. */
function languageBlock(side, lang) {
  const head = h("h3", {}, side, lang.declared ? h("span", { class: "muted" }, ` · declared ${lang.declared}`) : null);
  const notes = [];
  if (!lang.declared) notes.push("No language declared: the report shows what it detected, not what is wrong.");
  else if (!lang.known) notes.push(`py3langid does not know “${lang.declared}”: the side is not judged.`);
  notes.push(`${fmtNumber(lang.identified)} rows identified` +
    (lang.skipped_short ? `, ${fmtNumber(lang.skipped_short)} shorter than ${lang.min_chars} characters left out` : "") +
    (lang.sampled ? `, every ${lang.sample_every}th row (a sample)` : "") + ".");
  const other = lang.declared ? lang.detected.filter((d) => d.language !== lang.declared) : [];
  const otherShare = other.reduce((a, d) => a + d.share, 0);
  const headline = lang.declared && lang.identified
    ? h("p", { class: otherShare > 0 ? "lang-headline off" : "lang-headline", "data-side": side },
      h("strong", { class: "lang-share-other" }, pct(otherShare)), ` detected as another language than ${lang.declared}`)
    : null;
  const rows = lang.detected.map((d) => {
    const fill = h("div", { class: "bar-fill" });
    fill.style.width = `${Math.max(0.5, 100 * d.share)}%`;
    const off = lang.declared && d.language !== lang.declared;
    return h("div", { class: `bar-row lang-row${off ? " off" : ""}`, role: "listitem", "data-language": d.language },
      h("span", { class: "bar-label" }, d.language, d.language === lang.declared ? h("span", { class: "muted" }, " (declared)") : null),
      h("div", { class: "bar-track" }, fill),
      h("span", { class: "bar-value" }, `${pct(d.share)} · ${fmtNumber(d.count)}`));
  });
  return h("div", { class: "lang-side", "data-side": side }, head, headline,
    rows.length ? h("div", { class: "bars", role: "list", "aria-label": `languages detected in the ${side} side` }, rows)
      : h("p", { class: "muted" }, "No row long enough to identify."),
    h("p", { class: "muted small-note" }, notes.join(" ")));
}

function languagesCard(report) {
  return h("section", { class: "card", id: "report-languages", "aria-labelledby": "report-languages-title" },
    h("h2", { id: "report-languages-title" }, "Languages"),
    h("p", { class: "muted small-note" }, "By py3langid, the most likely language of each row; “another language” in the problems ",
      "below is stricter (10 times likelier than the declared one)."),
    h("div", { class: "grid2 wide" }, Object.entries(report.sides).map(([side, summary]) => languageBlock(side, summary.language))));
}

/** What an example says beside its texts: the detected language, the placeholders on one side only, the ratio. */
function detail(example) {
  const parts = [];
  if (example.detected) parts.push(`detected ${example.detected}` + (example.probability !== undefined ? ` (${example.probability})` : ""));
  if (example.source_only?.length) parts.push(`source only: ${example.source_only.join(" ")}`);
  if (example.target_only?.length) parts.push(`target only: ${example.target_only.join(" ")}`);
  if (example.ratio !== undefined) parts.push(`ratio ${example.ratio}`);
  if (example.characters?.length) parts.push(example.characters.join(" "));
  if (example.score !== undefined) parts.push(`score ${fmtNumber(example.score, 3)}`);
  return parts.join("; ");
}

function examplesTable(name, problem, languages) {
  const sides = Object.keys(problem.examples[0]).filter((k) => k === "source" || k === "target" || k === "text");
  const hasDetail = problem.examples.some((e) => detail(e));
  return h("table", { class: "compact examples" },
    h("caption", { class: "sr-only" }, `examples of ${PROBLEMS[name]?.[0] ?? name}`),
    h("thead", {}, h("tr", {}, h("th", { scope: "col", class: "line-col" }, "Line"),
      sides.map((side) => h("th", { scope: "col" }, side)), hasDetail ? h("th", { scope: "col", class: "why-col" }, "Why") : null)),
    h("tbody", {}, problem.examples.map((e) => h("tr", { "data-line": e.line },
      h("td", { class: "num example-line", "data-label": "line" }, fmtNumber(e.line)),
      sides.map((side) => h("td", { class: "example-text", lang: languages?.[side], "data-label": side }, cut(e[side]))),
      hasDetail ? h("td", { class: "muted", "data-label": "why" }, detail(e)) : null))));
}

function problemRow(name, problem, report, top) {
  const rows = report.rows;
  const [label, definition] = PROBLEMS[name] ?? [name, ""];
  const fill = h("div", { class: "bar-fill" });
  fill.style.width = `${problem.count ? Math.max(2, (100 * problem.share) / top) : 0}%`;  // against the largest share
  const estimated = problem.sampled || problem.estimated !== problem.count;
  const share = h("span", { class: "problem-share" }, pct(problem.share),
    problem.checked !== rows ? h("small", { class: "muted checked" }, `of ${fmtNumber(problem.checked)} checked`) : null);
  const summary = [
    h("span", { class: "problem-name" }, label, h("small", { class: "muted" }, definition)),
    h("span", { class: "problem-count num" }, fmtNumber(problem.count)),
    h("span", { class: "problem-bar bar-track", "aria-hidden": "true" }, fill),
    share,
    h("span", { class: "muted small-note problem-estimate" }, estimated ? `≈ ${fmtNumber(problem.estimated)} in all rows` : ""),
  ];
  if (!problem.count) return h("div", { class: "problem none", "data-problem": name }, h("div", { class: "problem-summary" }, summary));
  return h("details", { class: "problem", "data-problem": name },
    h("summary", { class: "problem-summary" }, summary),
    h("div", { class: "problem-examples" },
      h("p", { class: "muted small-note" }, problem.examples.length < problem.count
        ? `The first ${problem.examples.length} of ${fmtNumber(problem.count)}, by line number in the file:`
        : "Every one, by line number in the file:"),
      problem.examples.length ? examplesTable(name, problem, report.languages) : h("p", { class: "muted" }, "No example kept.")));
}

function problemsCard(report) {
  const entries = Object.entries(report.problems);
  const found = entries.filter(([, p]) => p.count > 0).length;
  const top = Math.max(1e-9, ...entries.map(([, p]) => p.share));
  return h("section", { class: "card", id: "report-problems", "aria-labelledby": "report-problems-title" },
    h("h2", { id: "report-problems-title" }, "Problems"),
    h("p", { class: "muted small-note" }, `${found} of ${entries.length} kinds found in ${fmtNumber(report.rows)} rows; each counted `,
      "on its own (a row may have several), except copies, other languages and misaligned pairs, which never overlap. ",
      "Open one to see its first rows."),
    h("div", { class: "problems" }, h("div", { class: "problem-header", "aria-hidden": "true" },
      h("span", {}, "problem"), h("span", { class: "num" }, "rows"), h("span", {}), h("span", {}, "share"), h("span", {})),
    entries.map(([name, problem]) => problemRow(name, problem, report, top))));
}

/** The report's cards, in the order a reader checks a corpus. */
export function reportCards(report) {
  return [
    problemsCard(report),
    lengthsCard(report),
    report.length_ratio ? ratioCard(report) : null,
    languagesCard(report),
  ];
}
