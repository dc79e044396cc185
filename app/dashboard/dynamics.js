// Training dynamics on the job page (GET /v1/jobs/{id}/dynamics). "Weights": for every weight matrix of the paper
// (W_Q, W_K, W_V, W_O of each attention, the FFN's W_1 and W_2, the LayerNorms, the shared embedding) and every
// layer, its gradient norm, weight norm and update-to-weight ratio ‖ΔW‖/‖W‖ at the recorded steps. "Attention": for
// every layer and head, its entropy and shares of weight on the diagonal, previous, first and </s> token, on the
// same validation sentences at every evaluation. A heatmap (rows × columns, colour = the value on a scale shared by
// all steps) with a slider and a play button over the steps, and the curves of one row (a line a column) over
// training: click a row of the heatmap to choose it.
import uPlot from "./uplot.js";
import { api } from "./api.js";
import { h, clear, fmtNumber, errorBox } from "./ui.js";

const KINDS = {
  weights: {
    title: "weight matrices",
    stats: {
      update_ratio: "update ratio ‖ΔW‖/‖W‖",
      grad_norm: "gradient norm ‖∇W‖ (before clipping)",
      weight_norm: "weight norm ‖W‖",
    },
    row: (g) => g.group,
    col: (g) => g.layer,
    colLabel: (c) => (c === null ? "–" : `layer ${c}`),
    rowHead: "component",
    log: true,
    firstRow: (rows) => rows.find((r) => r.endsWith("W_Q")) || rows[0],
  },
  attention: {
    title: "attention heads",
    stats: {
      entropy: "entropy (nats; 0 = one token)",
      diagonal: "share on the same position",
      previous: "share on the previous token",
      first: "share on the first token",
      eos: "share on the source's </s>",
    },
    row: (g) => `${g.group} layer ${g.layer}`,
    col: (g) => g.head,
    colLabel: (c) => `head ${c}`,
    rowHead: "attention, layer",
    log: false,
    firstRow: (rows) => rows.find((r) => r.startsWith("cross")) || rows[0],
  },
};
const LAYER_COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2", "#65a30d"];
const POLL_MS = 10_000;

/** Rows and columns of the heatmap, in the API's order (weights: components × layers, "–" for those without one;
 * attention: kind and layer × heads). */
export function layout(groups, kind = KINDS.weights) {
  const rows = [...new Set(groups.map(kind.row))];
  const numbered = [...new Set(groups.map(kind.col).filter((c) => c !== null))].sort((a, b) => a - b);
  const cols = groups.some((g) => kind.col(g) === null) ? [...numbered, null] : numbered;
  const index = new Map(groups.map((g, j) => [`${kind.row(g)}|${kind.col(g)}`, j]));
  return { rows, cols, at: (row, col) => index.get(`${row}|${col}`) };
}

/** [lo, hi] of the values of a [record][group] matrix (log10 of the positive ones with log), the colour scale. */
export function valueRange(matrix, log = true) {
  let lo = Infinity, hi = -Infinity;
  for (const row of matrix) {
    for (const v of row) {
      if (v === null || (log && !(v > 0))) continue;
      const x = log ? Math.log10(v) : v;
      lo = Math.min(lo, x); hi = Math.max(hi, x);
    }
  }
  return lo === Infinity ? [0, 1] : [lo, hi > lo ? hi : lo + 1];
}

function color(value, [lo, hi], log) {
  if (value === null || value === undefined || (log && !(value > 0))) return "#f1f5f9";
  const x = log ? Math.log10(value) : value;
  const t = Math.max(0, Math.min(1, (x - lo) / (hi - lo)));
  // pale yellow -> orange -> deep purple (low to high)
  const stops = [[255, 247, 188], [254, 153, 41], [204, 76, 2], [84, 39, 143]];
  const f0 = t * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(f0)), f = f0 - i;
  const c = stops[i].map((a, k) => Math.round(a + (stops[i + 1][k] - a) * f));
  return `rgb(${c.join(",")})`;
}

function heatTable(data, kind, stat, index, grid, selected, onPick, readout) {
  const values = data.values[stat][index] || [];
  const range = valueRange(data.values[stat], kind.log);
  const scaleValue = (x) => (kind.log ? 10 ** x : x);
  const head = h("tr", {}, h("th", { scope: "col" }, kind.rowHead), grid.cols.map((c) => h("th", { scope: "col" }, kind.colLabel(c))));
  const body = grid.rows.map((row) => h("tr", { class: row === selected ? "selected" : null, "data-row": row },
    h("th", { scope: "row" }, h("button", { type: "button", class: "link", onclick: () => onPick(row) }, row)),
    grid.cols.map((col) => {
      const j = grid.at(row, col);
      if (j === undefined) return h("td", { class: "empty" });
      const v = values[j];
      const where = `${row}${col === null ? "" : `, ${kind.colLabel(col)}`}`;
      return h("td", { style: `background:${color(v, range, kind.log)}`, "data-value": v ?? "", title: `${where}: ${fmtNumber(v)}`,
        onmouseover: () => { readout.textContent = `${where} at step ${data.steps[index]}: ${kind.stats[stat]} = ${fmtNumber(v)}`; },
        onclick: () => onPick(row) });
    })));
  const legend = h("p", { class: "muted dyn-scale" },
    h("span", { class: "swatch", style: `background:${color(scaleValue(range[0]), range, kind.log)}` }), ` ${fmtNumber(scaleValue(range[0]))} … `,
    h("span", { class: "swatch", style: `background:${color(scaleValue(range[1]), range, kind.log)}` }),
    ` ${fmtNumber(scaleValue(range[1]))} (${kind.log ? "log scale, " : ""}all steps)`);
  return h("div", { class: "scroll-x" }, h("table", { class: "dyn-heat", "data-stat": stat, "data-step": data.steps[index] },
    h("thead", {}, head), h("tbody", {}, body)), legend);
}

function curves(data, kind, stat, grid, row, width) {
  const cols = grid.cols.filter((c) => grid.at(row, c) !== undefined);
  const series = cols.map((c) => data.values[stat].map((r) => r[grid.at(row, c)]));
  const holder = h("figure", { class: "chart-card dyn-curves", "data-component": row });
  holder.append(h("figcaption", {}, h("strong", {}, row), ` — ${kind.stats[stat]} over training`));
  const positive = series.every((s) => s.every((v) => v > 0));
  holder.plot = new uPlot({
    width, height: 220,
    scales: { x: { time: false }, y: { distr: kind.log && positive ? 3 : 1 } },
    axes: [{ label: "step" }, { size: 64, values: (_, ticks) => ticks.map((v) => fmtNumber(v, 3)) }],
    series: [{ label: "step" }, ...cols.map((c, i) => ({ label: c === null ? row : kind.colLabel(c),
      stroke: LAYER_COLORS[i % LAYER_COLORS.length], width: 1.5 }))],
    legend: { live: true },
    cursor: { drag: { x: true, y: false } },
  }, [data.steps, ...series], holder);
  return holder;
}

/** The panel; it polls for new records every 10 s while `live()` is true and the signal is not aborted, and
 * `panel.refresh()` fetches them at once (the job page calls it when the job ends); `panel.shown()` draws what came
 * while it was hidden. */
export function dynamicsPanel(jobId, { signal, live = () => false } = {}) {
  const section = h("section", { class: "card", id: "dynamics" },
    h("h2", {}, "Training dynamics"),
    h("p", { class: "muted" }, "How each weight matrix learns (its gradient, its size, how far each Adam update moves it) "
      + "and what each attention head looks at, over training."));
  const kindChoice = h("div", { class: "dyn-kinds", role: "group", "aria-label": "what to show" });
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  section.append(kindChoice, body);
  const state = Object.fromEntries(Object.keys(KINDS).map((k) => [k, { data: null, stat: Object.keys(KINDS[k].stats)[0], index: 0, selected: null }]));
  let shown = "weights", playing = null, stale = false;

  function drawKinds() {
    kindChoice.replaceChildren(...Object.entries(KINDS).map(([k, kind]) => {
      const b = h("button", { type: "button", class: k === shown ? "tab active" : "tab", "aria-pressed": String(k === shown), "data-kind": k }, kind.title);
      b.addEventListener("click", () => { stopPlaying(); shown = k; drawKinds(); draw(); });
      return b;
    }));
  }

  function stopPlaying() { if (playing) { clearInterval(playing); playing = null; } }

  function draw() {
    // Hidden (the job page shows another panel): drawn when shown, at the width it then has.
    if (section.isConnected && !section.clientWidth) { stale = true; return; }
    stale = false;
    const kind = KINDS[shown], st = state[shown], data = st.data;
    if (!data || !data.steps.length) {
      const when = shown === "weights" ? "the first comes with step 1" : "the first comes with the first evaluation";
      clear(body, h("p", { class: "muted", id: "dynamics-empty" }, `No records yet: ${when}.`));
      return;
    }
    const grid = layout(data.groups, kind);
    st.selected = st.selected && grid.rows.includes(st.selected) ? st.selected : kind.firstRow(grid.rows);
    const readout = h("p", { class: "heat-readout", "aria-live": "polite" }, "Hover a cell for its value; click a row for its curves.");
    const choose = h("select", { id: "dynamics-stat", "aria-label": "statistic" },
      Object.entries(kind.stats).map(([k, text]) => h("option", { value: k, selected: k === st.stat }, text)));
    choose.addEventListener("change", () => { st.stat = choose.value; draw(); });
    const slider = h("input", { type: "range", id: "dynamics-step", min: 0, max: data.steps.length - 1, value: st.index,
      "aria-label": "recorded step" });
    const stepLabel = h("output", { for: "dynamics-step", id: "dynamics-step-label" }, `step ${data.steps[st.index]}`);
    const play = h("button", { type: "button", id: "dynamics-play" }, playing ? "Pause" : "Play");
    const pick = (row) => { st.selected = row; draw(); };
    const heat = h("div", {}, heatTable(data, kind, st.stat, st.index, grid, st.selected, pick, readout));
    slider.addEventListener("input", () => {
      st.index = Number(slider.value);
      stepLabel.textContent = `step ${data.steps[st.index]}`;
      heat.replaceChildren(heatTable(data, kind, st.stat, st.index, grid, st.selected, pick, readout));
    });
    play.addEventListener("click", () => {
      if (playing) { stopPlaying(); play.textContent = "Play"; return; }
      if (st.index >= data.steps.length - 1) st.index = 0;
      play.textContent = "Pause";
      playing = setInterval(() => {
        if (st.index >= data.steps.length - 1 || signal?.aborted) { stopPlaying(); play.textContent = "Play"; return; }
        slider.value = String(++st.index);
        slider.dispatchEvent(new Event("input"));
      }, 300);
    });
    const width = Math.max(280, (section.clientWidth || 720) - 40);
    clear(body,
      h("div", { class: "dyn-controls" }, choose, slider, stepLabel, play,
        h("span", { class: "muted" }, `${data.steps.length} of ${data.total_records} records`)),
      heat, readout, curves(data, kind, st.stat, grid, st.selected, width));
  }

  async function loadKind(k) {
    const st = state[k];
    if (!st.data) {
      st.data = await api(`/v1/jobs/${jobId}/dynamics?kind=${k}&max_records=500`, { signal });
      st.index = Math.max(0, st.data.steps.length - 1);
      return true;
    }
    const last = st.data.steps[st.data.steps.length - 1] ?? -1;
    const more = await api(`/v1/jobs/${jobId}/dynamics?kind=${k}&since_step=${last + 1}&max_records=10000`, { signal });
    if (!more.steps.length) return false;
    const atEnd = st.index >= st.data.steps.length - 1;  // following the newest (or nothing yet)
    if (!st.data.groups.length) { st.data.groups = more.groups; st.data.values = Object.fromEntries(Object.keys(more.values).map((n) => [n, []])); }
    st.data.steps.push(...more.steps);
    for (const n of Object.keys(more.values)) st.data.values[n].push(...more.values[n]);
    st.data.total_records += more.total_records;
    if (atEnd) st.index = st.data.steps.length - 1;
    return true;
  }

  async function load() {
    try {
      const changed = await Promise.all(Object.keys(KINDS).map(loadKind));
      if (changed.some(Boolean) && !playing) draw();
    } catch (err) {
      if (err.name !== "AbortError") clear(body, errorBox(`Could not load the training dynamics: ${err.message}`));
    }
  }

  drawKinds();
  load();
  section.refresh = load;
  section.shown = () => { if (stale) draw(); };
  const timer = setInterval(() => { if (live() && !playing) load(); }, POLL_MS);
  signal?.addEventListener("abort", () => { clearInterval(timer); stopPlaying(); });
  return section;
}
