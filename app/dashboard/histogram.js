// Histograms of the data report (docs/data.md) as SVG drawn by hand: bins of equal width on screen (a length's bins
// are of equal width, the length ratio's are quarter powers of two), what lies outside the bins as a paler bar at
// either end, and percentiles as vertical lines. Every bar has a tooltip; the figure has a text summary.

import { fmtNumber, h, s } from "./ui.js";

const W = 520, H = 200, LEFT = 44, RIGHT = 8, TOP = 28, BOTTOM = 30;
const MARKED = { p5: "dashed", p50: "solid", p95: "dashed" };  // the percentiles drawn as lines

/** "30–34" for the integer bin [30, 35); "7" for [7, 8). */
function intRange(lo, hi) {
  return hi - lo <= 1 ? fmtNumber(lo) : `${fmtNumber(lo)}–${fmtNumber(hi - 1)}`;
}

const FRACTIONS = { 0.125: "⅛", 0.25: "¼", 0.5: "½" };
const ratioText = (x) => FRACTIONS[x] ?? fmtNumber(x, 3);

/**
 * An SVG histogram. `bins`: [{label, count, outside?}] in order; `position(value)` the x of a value in bin units
 * (0 = the left edge of the first bin) or null; `ticks`: [{at (bin units), text}]; `percentiles`: {p5: v, ...}.
 */
function histogramSvg({ bins, position, ticks, percentiles, noun, ariaLabel }) {
  const top = Math.max(1, ...bins.map((b) => b.count));
  const bw = (W - LEFT - RIGHT) / bins.length, plotH = H - TOP - BOTTOM;
  const x = (units) => LEFT + units * bw, y = (count) => TOP + plotH * (1 - count / top);
  const total = bins.reduce((a, b) => a + b.count, 0) || 1;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "histogram", role: "img", "aria-label": ariaLabel });
  svg.append(
    s("line", { x1: LEFT, x2: W - RIGHT, y1: TOP, y2: TOP, class: "grid" }),
    s("text", { x: LEFT - 4, y: TOP + 4, "text-anchor": "end", class: "axis" }, fmtNumber(top)),
    s("text", { x: LEFT - 4, y: TOP + plotH + 4, "text-anchor": "end", class: "axis" }, "0"),
    s("line", { x1: LEFT, x2: W - RIGHT, y1: TOP + plotH, y2: TOP + plotH, class: "baseline" }));
  bins.forEach((bin, i) => {
    const height = Math.max(bin.count ? 2 : 0, TOP + plotH - y(bin.count));  // a single row stays visible
    svg.append(s("rect", { x: x(i) + 1, y: TOP + plotH - height, width: Math.max(1, bw - 2), height,
                           class: bin.outside ? "bar outside" : "bar", "data-count": bin.count },
      s("title", {}, `${bin.label}: ${fmtNumber(bin.count)} ${noun} (${fmtNumber((100 * bin.count) / total, 3)}%)`)));
  });
  for (const tick of ticks) {
    svg.append(s("line", { x1: x(tick.at), x2: x(tick.at), y1: TOP + plotH, y2: TOP + plotH + 4, class: "baseline" }),
               s("text", { x: x(tick.at), y: H - BOTTOM + 16, "text-anchor": "middle", class: "axis" }, tick.text));
  }
  let lastX = -Infinity, raised = false;  // a label too close to the one before goes a line higher
  for (const [name, dash] of Object.entries(MARKED)) {
    const at = percentiles?.[name] === undefined ? null : position(percentiles[name]);
    if (at === null) continue;
    raised = x(at) - lastX < 26 && !raised;
    lastX = x(at);
    svg.append(s("line", { x1: x(at), x2: x(at), y1: TOP - (raised ? 13 : 2), y2: TOP + plotH, class: `marker ${dash}`,
                           "data-percentile": name }, s("title", {}, `${name}: ${fmtNumber(percentiles[name])}`)),
               s("text", { x: x(at), y: TOP - (raised ? 17 : 6), "text-anchor": "middle", class: "marker-label" }, name));
  }
  return svg;
}

/**
 * Where `v` falls in bin units over `edges`: for a ratio by `toAxis` (log2); for an integer length at the middle of
 * its integer's share of the bin (7 in the bin of 7 alone: its middle).
 */
function positionIn(edges, v, offset, { toAxis = (z) => z, integers = false } = {}) {
  if (v < edges[0]) return offset > 0 ? offset / 2 : 0;
  const last = edges.length - 1;
  if (v >= edges[last]) return offset + last + 0.5;  // in the "above" bar
  let i = 0;
  while (i < last - 1 && v >= edges[i + 1]) i++;
  const frac = integers ? (v - edges[i] + 0.5) / (edges[i + 1] - edges[i])
    : (toAxis(v) - toAxis(edges[i])) / (toAxis(edges[i + 1]) - toAxis(edges[i]));
  return offset + i + Math.max(0, Math.min(1, frac));
}

/** A percentile table: p1 … p99 with min, mean and max where the summary has them. */
export function percentileTable(summary, caption) {
  const cols = [["min", summary.min], ...Object.entries(summary.percentiles), ["mean", summary.mean], ["max", summary.max]]
    .filter(([, v]) => v !== undefined && v !== null);
  return h("table", { class: "compact percentiles" }, h("caption", { class: "sr-only" }, caption),
    h("thead", {}, h("tr", {}, cols.map(([k]) => h("th", { scope: "col" }, k)))),
    h("tbody", {}, h("tr", {}, cols.map(([k, v]) => h("td", { class: "num", "data-key": k, "data-label": k }, fmtNumber(v))))));
}

/** The histogram of one side's lengths (LENGTHS of docs/data.md) in `unit` (characters or words). */
export function lengthHistogram(lengths, { side, unit }) {
  const { edges, counts, above } = lengths.histogram;
  const bins = counts.map((count, i) => ({ label: `${intRange(edges[i], edges[i + 1])} ${unit}`, count }));
  if (above) bins.push({ label: `${fmtNumber(edges[edges.length - 1])} ${unit} or more`, count: above, outside: true });
  const step = Math.ceil(edges.length / 10);
  // bins of one length each are labelled under their middle (the bar of 7 words), wider ones at their edges
  const single = edges.every((e, i) => i === 0 || e - edges[i - 1] === 1);
  const ticks = (single ? edges.slice(0, -1) : edges).map((e, i) => ({ at: single ? i + 0.5 : i, text: fmtNumber(e) }))
    .filter((_, i, all) => i % step === 0 || (!single && i === all.length - 1));
  const p = lengths.percentiles;
  const label = `${side} lengths in ${unit}: a histogram of ${fmtNumber(bins.reduce((a, b) => a + b.count, 0))} rows; ` +
    `median ${fmtNumber(p.p50)}, 5th percentile ${fmtNumber(p.p5)}, 95th ${fmtNumber(p.p95)}, longest ${fmtNumber(lengths.max)}`;
  return h("figure", { class: "histogram-card", "data-side": side, "data-unit": unit },
    h("figcaption", {}, h("strong", {}, side), h("span", { class: "muted" }, ` ${unit} per row`)),
    histogramSvg({ bins, position: (v) => positionIn(edges, v, 0, { integers: true }), ticks, percentiles: p, noun: "rows", ariaLabel: label }),
    percentileTable(lengths, `${side} length percentiles in ${unit}`));
}

/** The length-ratio histogram (target/source in characters, by quarter powers of two from 1/8 to 8). */
export function ratioHistogram(ratio) {
  const { edges, counts, below, above } = ratio.histogram;
  const offset = below ? 1 : 0;
  const bins = [];
  if (below) bins.push({ label: `under ${ratioText(edges[0])}`, count: below, outside: true });
  counts.forEach((count, i) => bins.push({ label: `${fmtNumber(edges[i], 3)}–${fmtNumber(edges[i + 1], 3)}`, count }));
  if (above) bins.push({ label: `${ratioText(edges[edges.length - 1])} or more`, count: above, outside: true });
  const ticks = edges.map((e, i) => ({ at: offset + i, text: ratioText(e) }))
    .filter((t) => Number.isInteger(Math.log2(edges[t.at - offset])));  // the powers of two
  const p = ratio.percentiles;
  const label = `length ratio ${ratio.definition} in ${ratio.unit}: a histogram of ${fmtNumber(ratio.pairs)} pairs on a log scale; ` +
    `median ${fmtNumber(p.p50)}, 1st percentile ${fmtNumber(p.p1)}, 99th ${fmtNumber(p.p99)}`;
  return h("figure", { class: "histogram-card", "data-side": "ratio" },
    h("figcaption", {}, h("strong", {}, `${ratio.definition}`), h("span", { class: "muted" }, ` in ${ratio.unit}, log scale`)),
    histogramSvg({ bins, position: (v) => positionIn(edges, v, offset, { toAxis: Math.log2 }), ticks, percentiles: p, noun: "pairs",
                   ariaLabel: label }),
    percentileTable(ratio, "length ratio percentiles"));
}
