// Charts drawn as SVG by hand: line charts for metrics, heatmaps for attention, bars for anatomy and top-k.

import { fmtCount, fmtNumber, h, s } from "./ui.js";

/** At most maxPoints points: the mean of equal buckets at each bucket's last step (as the API downsamples). */
export function downsample(steps, values, maxPoints) {
  const n = steps.length;
  if (n <= maxPoints) return { steps: steps.slice(), values: values.slice() };
  const outSteps = [], outValues = [];
  for (let b = 0; b < maxPoints; b++) {
    const lo = Math.floor((b * n) / maxPoints), hi = Math.floor(((b + 1) * n) / maxPoints);
    if (hi <= lo) continue;
    let sum = 0;
    for (let i = lo; i < hi; i++) sum += values[i];
    outSteps.push(steps[hi - 1]);
    outValues.push(sum / (hi - lo));
  }
  outValues[outValues.length - 1] = values[n - 1];
  return { steps: outSteps, values: outValues };
}

function niceTicks(lo, hi, count = 4) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  if (hi === lo) return [lo];
  const raw = (hi - lo) / count, mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((st) => raw <= st) || 10 * mag;
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

const W = 560, H = 220, PAD = { l: 56, r: 26, t: 12, b: 30 };

/**
 * A line chart of one metric series that can grow: append() buffers points, draws at most ~4 times a second,
 * and keeps at most `cap` points (older ones averaged into buckets) so 20,000-point jobs stay responsive.
 */
export class LineChart {
  constructor({ title, name, color = "#2563eb", cap = 600 }) {
    this.name = name;
    this.cap = cap;
    this.steps = [];
    this.values = [];
    this.total = 0;
    this.color = color;
    this.pending = false;
    this.readout = h("span", { class: "chart-readout", "aria-live": "off" });
    this.svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": `${title} chart` });
    this.svg.addEventListener("mousemove", (e) => this.hover(e));
    this.svg.addEventListener("mouseleave", () => { this.readout.textContent = ""; this.cursor?.remove(); });
    this.el = h("figure", { class: "chart-card", "data-series": name },
                h("figcaption", {}, h("strong", {}, title), " ", this.readout), this.svg);
    this.draw();
  }

  set(steps, values, total) {
    const kept = downsample(steps, values, this.cap);
    this.steps = kept.steps;
    this.values = kept.values;
    this.total = total ?? steps.length;
    this.schedule();
  }

  append(step, value) {
    const n = this.steps.length;
    if (n && step <= this.steps[n - 1]) return;  // already in the history (or a replay after reconnecting)
    this.steps.push(step);
    this.values.push(value);
    this.total += 1;
    if (this.steps.length > 2 * this.cap) {
      const kept = downsample(this.steps, this.values, this.cap);
      this.steps = kept.steps;
      this.values = kept.values;
    }
    this.schedule();
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    setTimeout(() => requestAnimationFrame(() => { this.pending = false; this.draw(); }), 250);
  }

  scales() {
    const xs = this.steps, ys = this.values;
    let x0 = xs[0], x1 = xs[xs.length - 1], y0 = Infinity, y1 = -Infinity;
    for (const y of ys) { if (Number.isFinite(y)) { if (y < y0) y0 = y; if (y > y1) y1 = y; } }
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    if (!(y1 > y0)) { const pad = Math.abs(y0) * 0.1 || 1; y0 -= pad; y1 += pad; }
    const pad = (y1 - y0) * 0.05;
    y0 -= pad; y1 += pad;
    const iw = W - PAD.l - PAD.r, ih = H - PAD.t - PAD.b;
    return { x0, x1, y0, y1, x: (v) => PAD.l + ((v - x0) / (x1 - x0)) * iw, y: (v) => PAD.t + ih - ((v - y0) / (y1 - y0)) * ih };
  }

  draw() {
    const svg = this.svg;
    svg.replaceChildren();
    this.cursor = null;
    if (!this.steps.length) {
      svg.append(s("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "chart-empty" }, "no points yet"));
      this.el.dataset.points = "0";
      return;
    }
    const sc = (this.sc = this.scales());
    const axes = s("g", { class: "axes" });
    for (const t of niceTicks(sc.y0, sc.y1)) {
      axes.append(s("line", { x1: PAD.l, x2: W - PAD.r, y1: sc.y(t), y2: sc.y(t), class: "grid" }),
                  s("text", { x: PAD.l - 6, y: sc.y(t) + 4, "text-anchor": "end" }, fmtNumber(t, 3)));
    }
    for (const t of niceTicks(sc.x0, sc.x1, 5).filter((t) => Number.isInteger(t))) {
      axes.append(s("text", { x: sc.x(t), y: H - 10, "text-anchor": "middle" }, fmtCount(t)));
    }
    axes.append(s("line", { x1: PAD.l, x2: PAD.l, y1: PAD.t, y2: H - PAD.b, class: "axis" }),
                s("line", { x1: PAD.l, x2: W - PAD.r, y1: H - PAD.b, y2: H - PAD.b, class: "axis" }));
    let d = "";
    for (let i = 0; i < this.steps.length; i++) {
      const y = this.values[i];
      if (!Number.isFinite(y)) continue;
      d += `${d ? "L" : "M"}${sc.x(this.steps[i]).toFixed(1)},${sc.y(y).toFixed(1)}`;
    }
    const path = s("path", { d, class: "line", stroke: this.color });
    svg.append(axes, path);
    if (this.steps.length === 1) {
      svg.append(s("circle", { cx: sc.x(this.steps[0]), cy: sc.y(this.values[0]), r: 3, fill: this.color }));
    }
    const last = this.values[this.values.length - 1];
    this.el.dataset.points = String(this.steps.length);
    this.readout.textContent = `last ${fmtNumber(last)} at step ${this.steps[this.steps.length - 1]}`;
  }

  hover(e) {
    if (!this.steps.length || !this.sc) return;
    const box = this.svg.getBoundingClientRect();
    const scale = Math.min(box.width / W, box.height / H);
    const offsetX = (box.width - W * scale) / 2;
    const x = (e.clientX - box.left - offsetX) / scale;
    const step = this.sc.x0 + ((x - PAD.l) / (W - PAD.l - PAD.r)) * (this.sc.x1 - this.sc.x0);
    let lo = 0, hi = this.steps.length - 1;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (this.steps[mid] < step) lo = mid + 1; else hi = mid; }
    if (lo > 0 && Math.abs(this.steps[lo - 1] - step) < Math.abs(this.steps[lo] - step)) lo -= 1;
    this.readout.textContent = `step ${this.steps[lo]}: ${fmtNumber(this.values[lo])}`;
    this.cursor?.remove();
    this.cursor = s("circle", { cx: this.sc.x(this.steps[lo]), cy: this.sc.y(this.values[lo]), r: 4, class: "cursor" });
    this.svg.append(this.cursor);
  }
}

/**
 * Heatmap of a [query][key] matrix (rows x cols) with token labels; hovering a cell reports the pair and
 * weight in `readout`.
 */
export function heatmap({ title, rows, cols, matrix, rowLabel = "query", colLabel = "key" }) {
  const cell = Math.max(10, Math.min(28, Math.floor(360 / Math.max(rows.length, cols.length, 1))));
  const labelW = 86, labelH = 70;
  const width = labelW + cell * cols.length + 4, height = labelH + cell * rows.length + 4;
  const readout = h("p", { class: "heat-readout", "aria-live": "polite" }, "Hover a cell to see the token pair.");
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, class: "heatmap", role: "img",
                          "aria-label": `${title}: attention weights of ${rows.length} ${rowLabel} by ${cols.length} ${colLabel} tokens` });
  svg.style.maxWidth = `${Math.max(width, 260)}px`;
  cols.forEach((t, j) => svg.append(s("text", { x: labelW + j * cell + cell / 2, y: labelH - 4,
    transform: `rotate(-60 ${labelW + j * cell + cell / 2} ${labelH - 4})`, class: "tok" }, clip(t))));
  rows.forEach((t, i) => svg.append(s("text", { x: labelW - 4, y: labelH + i * cell + cell * 0.7, "text-anchor": "end",
    class: "tok" }, clip(t))));
  const cells = s("g", { class: "cells" });
  for (let i = 0; i < rows.length; i++) {
    for (let j = 0; j < cols.length; j++) {
      const w = matrix[i]?.[j] ?? 0;
      cells.append(s("rect", { x: labelW + j * cell, y: labelH + i * cell, width: cell - 1, height: cell - 1,
        fill: heatColor(w), class: "cell", "data-i": i, "data-j": j, "data-w": w }));
    }
  }
  svg.append(cells);
  cells.addEventListener("mouseover", (e) => {
    const r = e.target.closest("rect");
    if (!r) return;
    const i = Number(r.dataset.i), j = Number(r.dataset.j);
    readout.textContent = `${rowLabel} “${rows[i]}” (${i}) → ${colLabel} “${cols[j]}” (${j}): ${Number(r.dataset.w).toFixed(4)}`;
  });
  return h("figure", { class: "heat-card" }, h("figcaption", {}, title), h("div", { class: "scroll-x" }, svg), readout);
}

const clip = (t) => (t.length > 10 ? `${t.slice(0, 9)}…` : t);

function heatColor(w) {
  const v = Math.max(0, Math.min(1, w));
  // white -> deep blue
  const r = Math.round(255 - 225 * v), g = Math.round(255 - 175 * v), b = Math.round(255 - 55 * v);
  return `rgb(${r},${g},${b})`;
}

/** Horizontal bars: [{label, value, text?}] scaled to the largest value (or max). */
export function bars(items, { max, ariaLabel, format = (v) => fmtNumber(v) } = {}) {
  const top = max ?? Math.max(...items.map((i) => i.value), 1e-12);
  return h("div", { class: "bars", role: "list", "aria-label": ariaLabel },
    items.map((item) => {
      const fill = h("div", { class: "bar-fill" });
      fill.style.width = `${Math.max(0.5, (100 * item.value) / top)}%`;
      return h("div", { class: "bar-row", role: "listitem" },
        h("span", { class: "bar-label", title: item.label }, item.label),
        h("div", { class: "bar-track" }, fill),
        h("span", { class: "bar-value" }, item.text ?? format(item.value)));
    }));
}

const SYMBOL_COLORS = { W_Q: "#2563eb", W_K: "#16a34a", W_V: "#ea580c", W_O: "#9333ea", W_1: "#0891b2", W_2: "#db2777",
                        E: "#64748b", gamma: "#a16207", beta: "#ca8a04" };
export const symbolColor = (sym) => SYMBOL_COLORS[sym] || "#94a3b8";  // b_Q, b_1...: grey

/** Stacked bars per component, one segment per parameter symbol (W_Q, W_K, W_V, W_O, W_1, ...). */
export function anatomyBars(parameters) {
  const components = new Map();
  for (const p of parameters) {
    if (!components.has(p.component)) components.set(p.component, []);
    components.get(p.component).push(p);
  }
  const totals = [...components.values()].map((ps) => ps.reduce((a, p) => a + p.count, 0));
  const top = Math.max(...totals, 1);
  const rows = [...components.entries()].map(([component, ps], k) => {
    const track = h("div", { class: "bar-track stacked" });
    for (const p of ps) {
      const seg = h("div", { class: "seg", title: `${p.name} ${p.symbol} [${p.shape.join("×")}] = ${p.count.toLocaleString("en-US")}` },
                    p.symbol.startsWith("W_") || p.symbol === "E" ? p.symbol : "");
      seg.style.width = `${(100 * p.count) / top}%`;
      seg.style.background = symbolColor(p.symbol);
      track.append(seg);
    }
    return h("div", { class: "bar-row", role: "listitem", "data-component": component },
      h("span", { class: "bar-label", title: component }, component), track,
      h("span", { class: "bar-value" }, fmtCount(totals[k])));
  });
  const legend = h("p", { class: "legend" }, Object.keys(SYMBOL_COLORS).map((sym) => {
    const sw = h("span", { class: "swatch" });
    sw.style.background = symbolColor(sym);
    return h("span", {}, sw, sym, " ");
  }), h("span", {}, h("span", { class: "swatch grey" }), "biases"));
  return h("div", {}, legend, h("div", { class: "bars anatomy", role: "list", "aria-label": "parameters per component" }, rows));
}

/** Alignment of a translation: source tokens on top, target tokens below, a line for each [t, s] pair. */
export function alignmentView({ source_tokens: src, target_tokens: tgt, pairs }) {
  const step = 64, width = Math.max(src.length, tgt.length) * step + 20, height = 130;
  const xs = (i, n) => 10 + step / 2 + i * step + ((Math.max(src.length, tgt.length) - n) * step) / 2;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, class: "alignment", role: "img",
                          "aria-label": `alignment of ${tgt.length} target tokens to ${src.length} source tokens` });
  svg.style.maxWidth = `${width}px`;
  for (const [t, si] of pairs) {
    if (t >= tgt.length || si >= src.length) continue;
    svg.append(s("line", { x1: xs(si, src.length), y1: 30, x2: xs(t, tgt.length), y2: 100, class: "align-line" },
                 s("title", {}, `${tgt[t]} ← ${src[si]}`)));
  }
  src.forEach((tok, i) => svg.append(s("text", { x: xs(i, src.length), y: 20, "text-anchor": "middle", class: "tok" }, clip(tok))));
  tgt.forEach((tok, i) => svg.append(s("text", { x: xs(i, tgt.length), y: 118, "text-anchor": "middle", class: "tok" }, clip(tok))));
  return h("div", { class: "scroll-x" }, svg);
}
