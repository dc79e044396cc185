// The job page's live curves: a uPlot chart of one or more metric series (training and validation loss on one)
// that grows with each streamed point. It is redrawn at most 4 times a second with setData, never rebuilt, keeps a
// zoomed view where the user put it, and holds at most 2 x `cap` points a series (then each bucket's lowest and
// highest, as the API sends them) so that long runs stay fast.

import { aligned, extremes, linePlot, zoomedIn } from "./plots.js";
import { fmtNumber, h } from "./ui.js";

export class CurveChart {
  /** series: [{name, label, color}], the metric names drawn and how the legend calls them. */
  constructor({ key, title, series, cap }) {
    this.series = series.map((s) => ({ ...s, x: [], y: [] }));
    this.cap = cap;
    this.pending = false;
    this.plot = null;
    this.readout = h("span", { class: "chart-readout" });
    this.holder = h("div", { class: "plot" });
    this.el = h("figure", { class: "chart-card curve-chart", "data-chart": key, "data-series": series.map((s) => s.name).join(" ") },
      h("figcaption", {}, h("strong", {}, title), " ", this.readout), this.holder);
  }

  /** Draw the chart; call it once `el` is in the page, so that the chart takes its width. */
  mount() {
    this.plot = linePlot(this.holder, { xLabel: "step", series: this.series }, this.table());
    this.el.plot = this.plot;  // as the comparison's charts: its scales and data can be read from the page
    this.mark();
  }

  get width() {
    return this.holder.clientWidth;
  }

  names() {
    return this.series.map((s) => s.name);
  }

  /** Replace a series by the history read from the API (already downsampled there). */
  set(name, steps, values) {
    const s = this.series.find((x) => x.name === name);
    if (!s) return;
    s.x = steps;
    s.y = values;
    this.draw();
  }

  append(name, step, value) {
    const s = this.series.find((x) => x.name === name);
    if (!s) return;
    const n = s.x.length;
    if (n && step <= s.x[n - 1]) return;  // already in the history (or a replay after reconnecting)
    s.x.push(step);
    s.y.push(value);
    if (s.x.length > 2 * this.cap) Object.assign(s, extremes(s.x, s.y, this.cap));
    this.schedule();
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    setTimeout(() => requestAnimationFrame(() => { this.pending = false; this.draw(); }), 250);
  }

  table() {
    return aligned(this.series);
  }

  draw() {
    if (!this.plot) return;
    this.plot.setData(this.table(), !zoomedIn(this.plot));  // a zoomed view stays where the user put it
    this.mark();
  }

  /** The caption's last values, and each series' drawn points as data-points-<name> (read by the tests). */
  mark() {
    const last = this.series.filter((s) => s.x.length).map((s) =>
      `${s.label} ${fmtNumber(s.y[s.y.length - 1])} at step ${fmtNumber(s.x[s.x.length - 1])}`);
    this.readout.textContent = last.length ? `last: ${last.join(" · ")}` : "no points yet";
    for (const s of this.series) this.el.setAttribute(`data-points-${s.name}`, String(s.x.length));
  }
}
