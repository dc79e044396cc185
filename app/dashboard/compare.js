// Run comparison (#/compare?ids=a,b,...): every job's curves overlaid, one chart a metric (uPlot: drag to zoom,
// double-click to reset, hover shows every series), by step or wall-clock time, log scale and smoothing; and a
// sortable table of the settings that differ with each job's best and final metrics. Data: GET /v1/jobs/compare.

import { api } from "./api.js";
import { aligned, COLORS, linePlot } from "./plots.js";
import { sortable } from "./sortable.js";
import { clear, errorBox, field, fmtNumber, h, shortId, statusBadge } from "./ui.js";

const FIRST = ["train_loss", "valid_loss", "bleu", "chrf", "masked_token_accuracy", "lr", "tokens_per_second"];
const TABLE_METRICS = ["valid_loss", "bleu", "chrf", "masked_token_accuracy", "train_loss"];
const MAX_POINTS = 4000;  // a series (about two a pixel column of a wide chart); the API averages longer ones

/** The metric names of all jobs, the usual ones first. */
export function metricNames(jobs) {
  const all = new Set(jobs.flatMap((j) => Object.keys(j.metrics)));
  return [...FIRST.filter((n) => all.has(n)), ...[...all].filter((n) => !FIRST.includes(n)).sort()];
}

/** Exponential moving average with TensorBoard's debiasing: weight 0 gives the values back. */
export function smooth(values, weight) {
  if (!weight) return values;
  let last = 0, n = 0;
  return values.map((v) => {
    last = last * weight + (1 - weight) * v;
    n += 1;
    return last / (1 - weight ** n);
  });
}

const label = (job) => job.name || shortId(job.id);

function chart(parent, name, jobs, options) {
  const parts = jobs.map((job, i) => {
    const m = job.metrics[name];
    const x = !m ? [] : options.xAxis === "seconds" ? m.seconds : m.steps;
    return { job, color: COLORS[i % COLORS.length], x: x || [], y: m && x ? smooth(m.values, options.smoothing) : [] };
  });
  const positive = parts.every((p) => p.y.every((v) => v > 0));
  const log = options.log && positive;
  const untimed = parts.filter((p) => p.job.metrics[name] && !p.x.length).map((p) => label(p.job));
  const holder = h("figure", { class: "chart-card compare-chart", "data-metric": name },
    h("figcaption", {}, h("strong", {}, name),
      log || !options.log ? "" : h("span", { class: "muted" }, " (linear: values ≤ 0)"),
      untimed.length ? h("span", { class: "muted untimed" }, ` (no wall-clock times, never started: ${untimed.join(", ")})`) : ""));
  const plot = h("div", { class: "plot" });
  holder.append(plot);
  parent.append(holder);  // in the page before drawing: the chart takes its width
  holder.plot = linePlot(plot, {
    xLabel: options.xAxis === "seconds" ? "seconds" : "step", log,
    series: parts.map((p) => ({ label: label(p.job), color: p.color })),
  }, aligned(parts));
  holder.dataset.points = String(parts.reduce((n, p) => n + p.y.length, 0));
}

function settingsTable(comparison) {
  const { jobs, differing } = comparison;
  const metrics = TABLE_METRICS.filter((n) => jobs.some((j) => j.metrics[n]));
  const columns = ["Job", "Status", ...differing, ...metrics.flatMap((n) => [`${n} best`, `${n} final`])];
  const cell = (v) => ({ sort: v ?? null, shown: v === null || v === undefined ? "–" : typeof v === "number" ? fmtNumber(v) : String(v) });
  const rows = jobs.map((job) => ({
    attrs: { "data-job": job.id },
    cells: [
      { sort: label(job), shown: h("a", { href: `#/jobs/${job.id}` }, label(job)) },
      { sort: job.status, shown: statusBadge(job.status) },
      ...differing.map((k) => cell(job.settings[k])),
      ...metrics.flatMap((n) => [cell(job.metrics[n]?.best), cell(job.metrics[n]?.final)]),
    ],
  }));
  const table = h("table", { class: "compare-table", id: "compare-table" });
  sortable(table, rows, columns);
  return h("section", { class: "card flush" }, table,
    differing.length ? null : h("p", { class: "muted pad" }, "These jobs have the same settings."));
}

export function renderCompare(container, query) {
  const ids = new URLSearchParams((query || "").replace(/^\?/, "")).get("ids") || "";
  const xAxis = h("select", { id: "compare-x" }, h("option", { value: "steps" }, "step"), h("option", { value: "seconds" }, "wall-clock time"));
  const log = h("input", { type: "checkbox", id: "compare-log" });
  const smoothing = h("input", { type: "range", id: "compare-smoothing", min: 0, max: 0.99, step: 0.01, value: 0 });
  const charts = h("section", { class: "compare-charts", "aria-label": "compared curves" });
  const note = h("div", { "aria-live": "polite" });
  const table = h("div");
  clear(container,
    h("div", { class: "page-head" }, h("h1", {}, "Compare runs"),
      h("div", { class: "inline" }, field("x-axis", xAxis), field("Log scale", log), field("Smoothing", smoothing))),
    note, table, charts);
  const controller = new AbortController();
  let comparison = null;
  function draw() {
    if (!comparison) return;
    const options = { xAxis: xAxis.value, log: log.checked, smoothing: Number(smoothing.value) };
    charts.replaceChildren();
    for (const name of metricNames(comparison.jobs)) chart(charts, name, comparison.jobs, options);
  }
  for (const control of [xAxis, log, smoothing]) control.addEventListener("change", draw);
  (async () => {
    try {
      comparison = await api(`/v1/jobs/compare?ids=${encodeURIComponent(ids)}&max_points=${MAX_POINTS}`, { signal: controller.signal });
    } catch (err) {
      if (err.name !== "AbortError") note.replaceChildren(errorBox(`Cannot compare: ${err.message}`));
      return;
    }
    table.replaceChildren(settingsTable(comparison));
    draw();
  })();
  return () => controller.abort();
}
