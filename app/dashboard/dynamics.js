// Training dynamics on the job page (GET /v1/jobs/{id}/dynamics): for every weight matrix of the paper (W_Q, W_K,
// W_V, W_O of each attention, the FFN's W_1 and W_2, the LayerNorms, the shared embedding) and every layer, its
// gradient norm, weight norm and update-to-weight ratio ‖ΔW‖/‖W‖ at the recorded steps. A heatmap (component ×
// layer, colour = the value on a log scale shared by all steps) with a slider and a play button over the steps,
// and the curves of one component (a line a layer) over training: click a row of the heatmap to choose it.
import uPlot from "./uplot.js";
import { api } from "./api.js";
import { h, clear, fmtNumber, errorBox } from "./ui.js";

const STATS = {
  update_ratio: "update ratio ‖ΔW‖/‖W‖",
  grad_norm: "gradient norm ‖∇W‖ (before clipping)",
  weight_norm: "weight norm ‖W‖",
};
const LAYER_COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2", "#65a30d"];
const POLL_MS = 10_000;

/** Rows (components, in the API's order) and columns (layers; "–" for those without one) of the heatmap. */
export function layout(groups) {
  const rows = [...new Set(groups.map((g) => g.group))];
  const layers = [...new Set(groups.map((g) => g.layer).filter((l) => l !== null))].sort((a, b) => a - b);
  const cols = groups.some((g) => g.layer === null) ? [...layers, null] : layers;
  const index = new Map(groups.map((g, j) => [`${g.group}|${g.layer}`, j]));
  return { rows, cols, at: (row, col) => index.get(`${row}|${col}`) };
}

/** [lo, hi] of log10 of the positive values of a [record][group] matrix (the colour scale of every step). */
export function logRange(matrix) {
  let lo = Infinity, hi = -Infinity;
  for (const row of matrix) for (const v of row) if (v > 0) { const l = Math.log10(v); lo = Math.min(lo, l); hi = Math.max(hi, l); }
  return lo === Infinity ? [0, 1] : [lo, hi > lo ? hi : lo + 1];
}

function color(value, [lo, hi]) {
  if (!(value > 0)) return "#f1f5f9";
  const t = Math.max(0, Math.min(1, (Math.log10(value) - lo) / (hi - lo)));
  // pale yellow -> orange -> deep purple (low to high)
  const stops = [[255, 247, 188], [254, 153, 41], [204, 76, 2], [84, 39, 143]];
  const x = t * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(x)), f = x - i;
  const c = stops[i].map((a, k) => Math.round(a + (stops[i + 1][k] - a) * f));
  return `rgb(${c.join(",")})`;
}

function heatTable(data, stat, index, grid, selected, onPick, readout) {
  const values = data[stat][index] || [];
  const range = logRange(data[stat]);
  const head = h("tr", {}, h("th", { scope: "col" }, "component"),
    grid.cols.map((c) => h("th", { scope: "col" }, c === null ? "–" : `layer ${c}`)));
  const body = grid.rows.map((row) => h("tr", { class: row === selected ? "selected" : null, "data-row": row },
    h("th", { scope: "row" }, h("button", { type: "button", class: "link", onclick: () => onPick(row) }, row)),
    grid.cols.map((col) => {
      const j = grid.at(row, col);
      if (j === undefined) return h("td", { class: "empty" });
      const v = values[j];
      return h("td", { style: `background:${color(v, range)}`, "data-value": v, title: `${row} ${col ?? ""}: ${fmtNumber(v)}`,
        onmouseover: () => { readout.textContent = `${row}${col === null ? "" : `, layer ${col}`} at step ${data.steps[index]}: ${STATS[stat]} = ${fmtNumber(v)}`; },
        onclick: () => onPick(row) });
    })));
  const legend = h("p", { class: "muted dyn-scale" },
    h("span", { class: "swatch", style: `background:${color(10 ** range[0], range)}` }), ` ${fmtNumber(10 ** range[0])} … `,
    h("span", { class: "swatch", style: `background:${color(10 ** range[1], range)}` }), ` ${fmtNumber(10 ** range[1])} (log scale, all steps)`);
  return h("div", { class: "scroll-x" }, h("table", { class: "dyn-heat", "data-stat": stat, "data-step": data.steps[index] },
    h("thead", {}, head), h("tbody", {}, body)), legend);
}

function curves(data, stat, grid, row, width) {
  const cols = grid.cols.filter((c) => grid.at(row, c) !== undefined);
  const series = cols.map((c) => data[stat].map((r) => r[grid.at(row, c)]));
  const holder = h("figure", { class: "chart-card dyn-curves", "data-component": row });
  holder.append(h("figcaption", {}, h("strong", {}, row), ` — ${STATS[stat]} over training`));
  const positive = series.every((s) => s.every((v) => v > 0));
  holder.plot = new uPlot({
    width, height: 220,
    scales: { x: { time: false }, y: { distr: positive ? 3 : 1 } },
    axes: [{ label: "step" }, { size: 64, values: (_, ticks) => ticks.map((v) => fmtNumber(v, 3)) }],
    series: [{ label: "step" }, ...cols.map((c, i) => ({ label: c === null ? row : `layer ${c}`,
      stroke: LAYER_COLORS[i % LAYER_COLORS.length], width: 1.5 }))],
    legend: { live: true },
    cursor: { drag: { x: true, y: false } },
  }, [data.steps, ...series], holder);
  return holder;
}

/** The panel; it polls for new records every 10 s while `live()` is true and the signal is not aborted, and
 * `panel.refresh()` fetches them at once (the job page calls it when the job ends). */
export function dynamicsPanel(jobId, { signal, live = () => false } = {}) {
  const section = h("section", { class: "card", id: "dynamics" },
    h("h2", {}, "Training dynamics per component"),
    h("p", { class: "muted" }, "How each weight matrix learns: its gradient, its size and how far each Adam update moves it, per layer."));
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  section.append(body);
  let data = null, stat = "update_ratio", index = 0, selected = null, playing = null;

  function draw() {
    if (!data || !data.steps.length) {
      clear(body, h("p", { class: "muted", id: "dynamics-empty" }, "No records yet: the first comes with step 1."));
      return;
    }
    const grid = layout(data.groups);
    selected = selected && grid.rows.includes(selected) ? selected : grid.rows.find((r) => r.endsWith("W_Q")) || grid.rows[0];
    const readout = h("p", { class: "heat-readout", "aria-live": "polite" }, "Hover a cell for its value; click a row for its curves.");
    const choose = h("select", { id: "dynamics-stat", "aria-label": "statistic" },
      Object.entries(STATS).map(([k, text]) => h("option", { value: k, selected: k === stat }, text)));
    choose.addEventListener("change", () => { stat = choose.value; draw(); });
    const slider = h("input", { type: "range", id: "dynamics-step", min: 0, max: data.steps.length - 1, value: index,
      "aria-label": "recorded step" });
    const stepLabel = h("output", { for: "dynamics-step", id: "dynamics-step-label" }, `step ${data.steps[index]}`);
    const play = h("button", { type: "button", id: "dynamics-play" }, playing ? "Pause" : "Play");
    const heat = h("div", {}, heatTable(data, stat, index, grid, selected, pick, readout));
    slider.addEventListener("input", () => {
      index = Number(slider.value);
      stepLabel.textContent = `step ${data.steps[index]}`;
      heat.replaceChildren(heatTable(data, stat, index, grid, selected, pick, readout));
    });
    play.addEventListener("click", () => {
      if (playing) { clearInterval(playing); playing = null; play.textContent = "Play"; return; }
      if (index >= data.steps.length - 1) index = 0;
      play.textContent = "Pause";
      playing = setInterval(() => {
        if (index >= data.steps.length - 1 || signal?.aborted) { clearInterval(playing); playing = null; play.textContent = "Play"; return; }
        slider.value = String(++index);
        slider.dispatchEvent(new Event("input"));
      }, 300);
    });
    function pick(row) { selected = row; draw(); }
    const width = Math.max(280, (section.clientWidth || 720) - 40);
    clear(body,
      h("div", { class: "dyn-controls" }, choose, slider, stepLabel, play,
        h("span", { class: "muted" }, `${data.steps.length} of ${data.total_records} records`)),
      heat, readout, curves(data, stat, grid, selected, width));
  }

  async function load() {
    try {
      if (!data) {
        data = await api(`/v1/jobs/${jobId}/dynamics?max_records=500`, { signal });
        index = Math.max(0, data.steps.length - 1);
      } else {
        const last = data.steps[data.steps.length - 1] ?? -1;
        const more = await api(`/v1/jobs/${jobId}/dynamics?since_step=${last + 1}&max_records=10000`, { signal });
        if (!more.steps.length) return;
        const atEnd = index === data.steps.length - 1;
        if (!data.groups.length) data.groups = more.groups;
        for (const k of ["steps", ...Object.keys(STATS)]) data[k].push(...more[k]);
        data.total_records += more.total_records;
        if (atEnd) index = data.steps.length - 1;
      }
      draw();
    } catch (err) {
      if (err.name !== "AbortError") clear(body, errorBox(`Could not load the training dynamics: ${err.message}`));
    }
  }

  load();
  section.refresh = load;
  const timer = setInterval(() => { if (live() && !playing) load(); }, POLL_MS);
  signal?.addEventListener("abort", () => { clearInterval(timer); if (playing) clearInterval(playing); });
  return section;
}
