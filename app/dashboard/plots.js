// uPlot line charts, shared by the job page and the run comparison: several series on one canvas over one x-axis,
// drag to zoom (double-click resets), the legend shows every series' value under the cursor, and the chart fills
// its holder's width, following the window.

import { fmtNumber } from "./ui.js";
import uPlot from "./uplot.js";

export const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f", "#92400e", "#475569"];

/** uPlot's aligned table: [xs, ys of series 1, ys of series 2, ...] with null where a series has no point at x. */
export function aligned(series) {
  const xs = [...new Set(series.flatMap((s) => s.x))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const columns = series.map((s) => {
    const ys = new Array(xs.length).fill(null);
    s.x.forEach((x, i) => { ys[index.get(x)] = s.y[i]; });
    return ys;
  });
  return [xs, ...columns];
}

/**
 * At most maxPoints points: the first and the last, and between them the lowest and highest of each of
 * (maxPoints - 2) / 2 equal buckets in their order (as the API's downsample=extremes): no spike is averaged away.
 */
export function extremes(xs, ys, maxPoints) {
  const n = xs.length, buckets = Math.floor((maxPoints - 2) / 2);
  if (n <= maxPoints || buckets < 1) return { x: xs, y: ys };
  const kept = [0];
  for (let b = 0; b < buckets; b++) {
    const lo = Math.floor((b * n) / buckets), hi = Math.floor(((b + 1) * n) / buckets);
    if (hi <= lo) continue;
    let low = lo, high = lo;
    for (let i = lo + 1; i < hi; i++) {
      if (ys[i] < ys[low]) low = i;
      if (ys[i] > ys[high]) high = i;
    }
    for (const i of low === high ? [low] : [Math.min(low, high), Math.max(low, high)]) {
      if (i !== kept[kept.length - 1]) kept.push(i);
    }
  }
  if (kept[kept.length - 1] !== n - 1) kept.push(n - 1);
  return { x: kept.map((i) => xs[i]), y: kept.map((i) => ys[i]) };
}

const widthOf = (holder) => Math.max(240, Math.floor(holder.clientWidth || 600));

/**
 * A uPlot chart drawn into `holder` of `series` ([{label, color, width?, dash?, alpha?}]: a dashed or faded line for
 * what matters less, a sweep's pruned trials) against `xLabel`, resized with its holder.
 * `data` is an aligned table (see aligned()); `hooks` are uPlot's (e.g. setScale, to follow a zoom).
 */
export function linePlot(holder, { xLabel, series, height = 240, log = false, hooks = {} }, data) {
  const opts = {
    width: widthOf(holder), height,
    scales: { x: { time: false }, y: { distr: log ? 3 : 1 } },
    axes: [{ label: xLabel }, { size: 64, values: (_, ticks) => ticks.map((v) => fmtNumber(v, 3)) }],  // 1.00e-4, not uPlot's "0"
    series: [{ label: xLabel }, ...series.map((s) => ({
      label: s.label, stroke: s.color, width: s.width ?? 1.5, spanGaps: true,
      ...(s.dash ? { dash: s.dash } : {}), ...(s.alpha !== undefined ? { alpha: s.alpha } : {}),
      value: (_, v) => (v === null || v === undefined ? "--" : fmtNumber(v)),  // 4.80e-4, not uPlot's "0"
    }))],
    legend: { live: true },
    // hovering shows each series' nearest point: validation runs every few hundred steps, between them it is null
    cursor: { drag: { x: true, y: false }, hover: { skip: [null] } },
    // a chart destroyed to be drawn anew (a sweep's new trial) stops following the window
    hooks: { ...hooks, destroy: [...(hooks.destroy || []), () => resized.disconnect()] },
  };
  const plot = new uPlot(opts, data, holder);
  const resized = new ResizeObserver(() => {
    const width = widthOf(holder);
    if (width !== plot.width) plot.setSize({ width, height });
  });
  resized.observe(holder);
  return plot;
}

/** Whether the x scale shows less than all of the plot's data (the user zoomed in). */
export function zoomedIn(plot) {
  const xs = plot.data[0];
  if (!xs || !xs.length) return false;
  const { min, max } = plot.scales.x;
  return min > xs[0] || max < xs[xs.length - 1];
}
