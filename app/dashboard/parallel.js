// A sweep's settings against its objective as parallel coordinates, drawn as SVG by hand (no library): one vertical
// axis per dimension of the search space plus one for the objective, one polyline per trial that has a value (its
// model's) or a best reported value (a pruned or running trial), coloured from worse to better. A choice is a
// categorical axis (its values evenly spaced), a log range a logarithmic one; the objective's axis spans the values
// drawn. Hovering a line names the trial; clicking it opens the trial's job.

import { fmtNumber, h, s } from "./ui.js";

const HEIGHT = 330, TOP = 58, BOTTOM = 34, SIDE = 70;
const AXIS_GAP = { most: 260, least: 150 };  // px between axes: the widest that fits 4 axes in a card, the narrowest
const MIN_SCALE = 0.65;  // before the labels run into each other; a narrow screen shrinks the chart this far, then scrolls
// Worse to better (part of matplotlib's "plasma"): every stop stays readable on white.
const RAMP = [[252, 166, 54], [225, 100, 98], [177, 42, 144], [106, 0, 168], [13, 8, 135]];
let gradients = 0;  // a unique id for each chart's legend gradient

/** Where a value sits on an axis (0 at the bottom, 1 at the top) and the ticks to label it with. */
function axisOf(dim) {
  if (dim.type === "choice") {
    const labels = dim.values.map(String), n = labels.length;
    const at = (v) => { const i = labels.indexOf(String(v)); return i < 0 ? null : (i + 0.5) / n; };
    return { at, ticks: labels.map((label, i) => ({ y: (i + 0.5) / n, label })), kind: "choice" };
  }
  const log = Boolean(dim.log) && dim.low > 0;
  const f = log ? Math.log10 : (x) => x;
  const lo = f(dim.low), hi = f(dim.high);
  const at = (v) => (typeof v !== "number" ? null : hi === lo ? 0.5 : (f(v) - lo) / (hi - lo));
  const middle = log ? Math.sqrt(dim.low * dim.high) : (dim.low + dim.high) / 2;
  const values = hi === lo ? [dim.low] : [dim.low, middle, dim.high];
  return { at, ticks: values.map((v) => ({ y: at(v), label: fmtNumber(v, 3) })), kind: log ? "log" : "linear" };
}

/** A colour between worse (t = 0) and better (t = 1). */
export function rampColor(t) {
  const x = Math.max(0, Math.min(1, t)) * (RAMP.length - 1), i = Math.min(RAMP.length - 2, Math.floor(x)), f = x - i;
  const c = RAMP[i].map((a, k) => Math.round(a + (RAMP[i + 1][k] - a) * f));
  return `rgb(${c.join(",")})`;
}

const objectiveOf = (t) => t.value ?? t.best_value;

/**
 * The chart of `sweep` (its space, metric, direction and trials) as a figure; `onOpen(trial)` is called when a
 * trial's line is clicked.
 */
export function parallelCoordinates(sweep, { onOpen } = {}) {
  const names = Object.keys(sweep.space);
  const drawn = sweep.trials.filter((t) => objectiveOf(t) !== null && objectiveOf(t) !== undefined);
  const readout = h("p", { class: "heat-readout", "aria-live": "polite" },
    drawn.length ? "Hover a line to see its trial; click it to open the trial's job." : "No trial has reported a value yet.");
  const values = drawn.map(objectiveOf);
  const low = Math.min(...values), high = Math.max(...values);
  const maximize = sweep.direction === "maximize";
  const better = (v) => (high === low ? 1 : (maximize ? v - low : high - v) / (high - low));
  const objective = values.length ? axisOf({ type: "float", low, high }) : { at: () => null, ticks: [] };
  const axes = [...names.map((name) => ({ name, ...axisOf(sweep.space[name]) })),
    { name: sweep.metric, ...objective, kind: "objective", label: maximize ? "higher is better" : "lower is better" }];
  const gap = Math.max(AXIS_GAP.least, Math.min(AXIS_GAP.most, 780 / Math.max(1, axes.length - 1)));
  const width = SIDE * 2 + gap * (axes.length - 1), plotHeight = HEIGHT - TOP - BOTTOM;
  const x = (i) => SIDE + i * gap, y = (pos) => TOP + (1 - pos) * plotHeight;
  const svg = s("svg", { viewBox: `0 0 ${width} ${HEIGHT + 26}`, class: "parallel", role: "img",
    "aria-label": `${drawn.length} trials: ${names.join(", ")} against ${sweep.metric}` });
  svg.style.maxWidth = `${width}px`;
  svg.style.minWidth = `${Math.round(width * MIN_SCALE)}px`;
  const lines = s("g", { class: "pc-lines" });
  // worse first: the better trials are drawn on top
  const ordered = [...drawn].sort((a, b) => better(objectiveOf(a)) - better(objectiveOf(b)));
  for (const trial of ordered) {
    const points = axes.map((axis, i) => {
      const pos = i === axes.length - 1 ? axis.at(objectiveOf(trial)) : axis.at(trial.params[axis.name]);
      return pos === null ? null : `${x(i)},${y(pos).toFixed(1)}`;
    });
    if (points.includes(null)) continue;  // a value outside the space (never sampled by it): not drawn
    const best = sweep.best?.number === trial.number;
    const path = s("path", {
      d: `M${points.join("L")}`, class: `pc-line${trial.status === "pruned" ? " pruned" : ""}${best ? " best" : ""}`,
      stroke: rampColor(better(objectiveOf(trial))), "data-trial": trial.number, "data-status": trial.status,
    }, s("title", {}, describe(sweep, trial)));
    lines.append(path);
  }
  svg.append(lines);
  axes.forEach((axis, i) => {
    const [section, field] = axis.name.includes(".") ? axis.name.split(/\.(.*)/s) : ["", axis.name];
    const g = s("g", { class: `pc-axis ${axis.kind}`, "data-axis": axis.name });
    g.append(s("line", { x1: x(i), x2: x(i), y1: y(0), y2: y(1) }),
      s("text", { x: x(i), y: 16, "text-anchor": "middle", class: "pc-section" }, section || "objective"),
      s("text", { x: x(i), y: 32, "text-anchor": "middle", class: "pc-name" }, field, s("title", {}, axis.name)),
      s("text", { x: x(i), y: 46, "text-anchor": "middle", class: "pc-kind" }, axis.label ?? axis.kind));
    for (const tick of axis.ticks) {
      if (tick.y === null || !Number.isFinite(tick.y)) continue;
      g.append(s("line", { x1: x(i) - 4, x2: x(i), y1: y(tick.y), y2: y(tick.y) }),
        s("text", { x: x(i) - 7, y: y(tick.y) + 4, "text-anchor": "end", class: "pc-tick" }, tick.label));
    }
    svg.append(g);
  });
  svg.append(legend(width, sweep));
  lines.addEventListener("mouseover", (e) => {
    const trial = sweep.trials.find((t) => String(t.number) === e.target.closest("path")?.dataset.trial);
    if (trial) readout.textContent = describe(sweep, trial);
  });
  lines.addEventListener("click", (e) => {
    const trial = sweep.trials.find((t) => String(t.number) === e.target.closest("path")?.dataset.trial);
    if (trial) onOpen?.(trial);
  });
  return h("figure", { class: "heat-card parallel-card", id: "sweep-parallel", "data-lines": lines.childElementCount },
    h("figcaption", {}, "Settings against the objective"), h("div", { class: "scroll-x" }, svg), readout);
}

/** The colour legend: a gradient from the worse end of the drawn values to the better. */
function legend(width, sweep) {
  const id = `pc-ramp-${++gradients}`, w = 160, left = width - SIDE - w, top = HEIGHT + 6;
  const gradient = s("linearGradient", { id }, RAMP.map((_, i) =>
    s("stop", { offset: `${(100 * i) / (RAMP.length - 1)}%`, "stop-color": rampColor(i / (RAMP.length - 1)) })));
  return s("g", { class: "pc-legend" }, s("defs", {}, gradient),
    s("text", { x: left - 6, y: top + 10, "text-anchor": "end", class: "pc-tick" }, `worse ${sweep.metric}`),
    s("rect", { x: left, y: top, width: w, height: 12, rx: 2, fill: `url(#${id})` }),
    s("text", { x: left + w + 6, y: top + 10, class: "pc-tick" }, "better"),
    s("line", { x1: SIDE, x2: SIDE + 26, y1: top + 6, y2: top + 6, class: "pc-line pruned", stroke: "#6b7280" }),
    s("text", { x: SIDE + 32, y: top + 10, class: "pc-tick" }, "pruned (best value it reported)"));
}

/** "trial 3 (pruned): bleu 12.5 · training.lr_scale 0.41 · model.preset tiny" */
function describe(sweep, trial) {
  const value = trial.value !== null ? fmtNumber(trial.value) : `${fmtNumber(trial.best_value)} (best reported)`;
  const params = Object.entries(trial.params).map(([k, v]) => `${k} ${typeof v === "number" ? fmtNumber(v) : v}`);
  return `trial ${trial.number} (${trial.status}): ${sweep.metric} ${value} · ${params.join(" · ")}`;
}
