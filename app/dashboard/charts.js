// Charts drawn as SVG by hand: heatmaps for attention, bars for anatomy and top-k, alignment lines. (Metric curves
// are uPlot canvases: plots.js.)

import { fmtCount, fmtNumber, h, s } from "./ui.js";

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
