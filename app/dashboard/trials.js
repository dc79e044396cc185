// A sweep's trials on its page: the table (sortable by any column, a row opens the trial's job, a pruned trial
// marked and why it stopped, a trial whose settings were given rather than sampled marked "given") and one uPlot
// chart of every trial's objective at each evaluation, by seconds of training or by step (the sweep's `resource`),
// pruned trials dashed and faded. Both follow the page's refreshes without losing the reader's sort or zoom.

import { aligned, COLORS, linePlot, zoomedIn } from "./plots.js";
import { sortable } from "./sortable.js";
import { fmtNumber, h, statusBadge } from "./ui.js";

const show = (v) => (v === null || v === undefined ? "–" : typeof v === "number" ? fmtNumber(v) : String(v));
export const trialColor = (number) => COLORS[number % COLORS.length];

const givenMark = () => h("span", { class: "given-mark", title: "its settings were given (first_trials), not sampled" }, " given");

function trialRow(sweep, t) {
  const best = sweep.best?.number === t.number;
  const link = t.job_id ? h("a", { href: `#/jobs/${t.job_id}`, title: `the job of trial ${t.number}` }, `#${t.number}`)
    : h("span", { title: "its settings made no valid job: never run" }, `#${t.number}`);
  const badge = statusBadge(t.status);
  if (t.stop_reason) badge.title = t.stop_reason;
  return {
    attrs: { "data-trial": t.number, "data-status": t.status, "data-job": t.job_id,
             class: [t.job_id ? "trial-row" : null, best ? "best-trial" : null].filter(Boolean).join(" ") || null },
    cells: [
      { sort: t.number, shown: [link, best ? h("span", { class: "best-mark", title: "the best trial" }, " ★") : null,
                                t.given ? givenMark() : null] },
      { sort: t.status, shown: badge },
      { sort: t.value, shown: show(t.value), attrs: { class: "num" } },
      { sort: t.best_value, shown: show(t.best_value), attrs: { class: "num" } },
      ...Object.keys(sweep.space).map((name) => ({ sort: t.params[name], shown: show(t.params[name]) })),
      { sort: t.worker_minutes, shown: show(t.worker_minutes), attrs: { class: "num" } },
      { sort: t.stop_reason, shown: t.stop_reason ? h("span", { class: "stop-reason", title: t.stop_reason }, t.stop_reason) : "–" },
    ],
  };
}

/** The trials table of `sweep`: {el, update(sweep)}. */
export function trialsTable(sweep) {
  const columns = ["Trial", "Status", "Value", "Best value", ...Object.keys(sweep.space), "Worker min", "Stopped because"];
  const table = h("table", { class: "sortable trials-table", id: "trials-table" },
    h("caption", { class: "sr-only" }, "Trials; click a column's header to sort by it"));
  const caption = table.firstChild;
  const setRows = sortable(table, sweep.trials.map((t) => trialRow(sweep, t)), columns);
  table.prepend(caption);
  table.addEventListener("click", (e) => {  // the whole row opens the trial's job, not only its number
    const row = e.target.closest("tr[data-job]");
    if (!row || e.target.closest("a, button")) return;
    location.hash = `#/jobs/${row.dataset.job}`;
  });
  const el = h("section", { class: "card flush", id: "sweep-trials" }, h("h2", { class: "pad" }, "Trials"), table);
  return { el, update: (next) => setRows(next.trials.map((t) => trialRow(next, t))) };
}

/** Each trial's objective curve as a series: dashed and faded when pruned, thicker for the best. */
function curveSeries(sweep) {
  return sweep.trials.filter((t) => t.curve.at.length).map((t) => {
    const pruned = t.status === "pruned", best = sweep.best?.number === t.number;
    return { label: `#${t.number}${pruned ? " pruned" : ""}`, color: trialColor(t.number), x: t.curve.at, y: t.curve.values,
             width: best ? 3 : 1.5, ...(pruned ? { dash: [6, 4], alpha: 0.55 } : {}) };
  });
}

/** The chart of every trial's objective over training: {el, mount(), update(sweep)}; mount once `el` is placed. */
export function trialCurves(sweep) {
  const plotBox = h("div", { class: "plot" });
  const note = h("span", { class: "chart-readout" });
  const empty = h("p", { class: "muted" }, "No trial has reported an evaluation yet.");
  const el = h("figure", { class: "chart-card", id: "sweep-curves" },
    h("figcaption", {}, h("strong", {}, `${sweep.metric} at each evaluation`), note), plotBox, empty);
  let plot = null, shape = "";
  function draw(current) {
    const series = curveSeries(current);
    const x = current.resource === "seconds" ? "seconds of training" : "step";
    note.textContent = series.length ? `${series.length} trials; pruned ones dashed` : "no evaluation reported yet";
    el.dataset.series = String(series.length);
    empty.hidden = series.length > 0;
    if (!series.length) {  // nothing to draw: no empty axes
      plot?.destroy();
      plot = null;
      shape = "";
      plotBox.replaceChildren();
      return;
    }
    const now = JSON.stringify(series.map((s) => [s.label, s.width]));
    if (plot && now === shape) {  // the same trials, more points: keep a zoomed view where the reader put it
      plot.setData(aligned(series), !zoomedIn(plot));
      return;
    }
    plot?.destroy();
    plotBox.replaceChildren();
    shape = now;
    plot = linePlot(plotBox, { xLabel: x, series }, aligned(series));
    el.plot = plot;
  }
  return { el, mount: () => draw(sweep), update: draw };
}
