// The job page's live curves: a uPlot chart of one or more metric series (training and validation loss on one)
// that grows with each streamed point. It is redrawn at most 4 times a second with setData, never rebuilt, keeps a
// zoomed view where the user put it, and holds at most 2 x `cap` points a series (then each bucket's lowest and
// highest, as the API sends them) so that long runs stay fast. A zoom reads the steps in view again, at the detail
// the chart's width can show, and merges them into the series: a double-click still resets to the whole run.

import { aligned, extremes, linePlot, zoomedIn } from "./plots.js";
import { fmtNumber, h } from "./ui.js";

export class CurveChart {
  /**
   * series: [{name, label, color}], the metric names drawn and how the legend calls them; detail(names, from, to,
   * maxPoints) resolves to {name: {steps, values}} of those steps.
   */
  constructor({ key, title, series, cap, detail }) {
    this.series = series.map((s) => ({ ...s, x: [], y: [] }));
    this.cap = cap;
    this.detail = detail;
    this.refined = "";  // the step range last read in detail
    this.refineTimer = null;
    this.pending = false;
    this.plot = null;
    this.readout = h("span", { class: "chart-readout" });
    this.holder = h("div", { class: "plot" });
    this.el = h("figure", { class: "chart-card curve-chart", "data-chart": key, "data-series": series.map((s) => s.name).join(" ") },
      h("figcaption", {}, h("strong", {}, title), " ", this.readout), this.holder);
  }

  /** Draw the chart; call it once `el` is in the page, so that the chart takes its width. */
  mount() {
    const hooks = { setScale: [(_, key) => { if (key === "x") this.scheduleRefine(); }] };
    this.plot = linePlot(this.holder, { xLabel: "step", series: this.series, hooks }, this.table());
    this.el.plot = this.plot;  // as the comparison's charts: its scales and data can be read from the page
    this.mark();
  }

  get width() {
    return this.holder.clientWidth;
  }

  names() {
    return this.series.map((s) => s.name);
  }

  /** Replace the series by the history read from the API ({name: {steps, values}}, downsampled there). */
  load(history) {
    for (const s of this.series) {
      if (!history[s.name]) continue;
      s.x = history[s.name].steps;
      s.y = history[s.name].values;
    }
    this.refined = "";
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

  scheduleRefine() {
    clearTimeout(this.refineTimer);
    this.refineTimer = setTimeout(() => this.refine(), 200);
  }

  /** After a zoom: the steps in view at the detail of the chart's width, in place of the coarser points there. */
  async refine() {
    if (!this.detail || !zoomedIn(this.plot)) return;
    const from = Math.max(0, Math.floor(this.plot.scales.x.min)), to = Math.ceil(this.plot.scales.x.max);
    if (this.refined === `${from}-${to}`) return;
    this.refined = `${from}-${to}`;
    let got;
    try {
      got = await this.detail(this.names(), from, to, 2 * this.width + 1);
    } catch {
      return;  // the coarser points stay (an aborted page, a lost connection)
    }
    for (const s of this.series) {
      const d = got[s.name];
      if (!d || !d.steps.length) continue;
      const start = s.x.findIndex((x) => x >= from), end = s.x.findIndex((x) => x > to);
      const cut = (list, middle) => [...list.slice(0, start < 0 ? list.length : start), ...middle,
                                     ...(end < 0 ? [] : list.slice(end))];
      s.x = cut(s.x, d.steps);
      s.y = cut(s.y, d.values);
    }
    this.draw();
    this.el.dataset.refined = this.refined;
  }

  table() {
    return aligned(this.series);
  }

  draw() {
    if (!this.plot) return;
    this.plot.setData(this.table(), !zoomedIn(this.plot));  // a zoomed view stays where the user put it
    this.mark();
  }

  /** The caption's last values, and each series' drawn points as data-points-<name> (read by the tests; a pair's
   * series "bleu/en-fr" as data-points-bleu-en-fr, a slash being no attribute character). */
  mark() {
    const last = this.series.filter((s) => s.x.length).map((s) =>
      `${s.label} ${fmtNumber(s.y[s.y.length - 1])} at step ${fmtNumber(s.x[s.x.length - 1])}`);
    this.readout.textContent = last.length ? `last: ${last.join(" · ")}` : "no points yet";
    for (const s of this.series) this.el.setAttribute(`data-points-${s.name.replace("/", "-")}`, String(s.x.length));
  }
}
