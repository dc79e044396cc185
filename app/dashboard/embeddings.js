// Embeddings over training (GET /v1/jobs/{id}/embeddings, or a model's final ones at /v1/models/{id}/embeddings):
// a 2-D map (PCA) of the most frequent tokens' embeddings at each checkpoint, on axes fixed over all checkpoints so
// that tokens can be seen moving, with a slider over the checkpoints, and the nearest neighbours of the watched
// tokens at that checkpoint. Click a watched token to mark it and its neighbours on the map.
import { api } from "./api.js";
import { h, s, clear, fmtNumber, errorBox } from "./ui.js";

const LABELLED = 40;  // the most frequent tokens carry their label on the map; hover shows any token
const POLL_MS = 15_000;

/** [xmin, xmax, ymin, ymax] over every checkpoint's points (the fixed axes of the map). */
export function extent(points) {
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const step of points) for (const [x, y] of step) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
  if (x0 === Infinity) return [-1, 1, -1, 1];
  const pad = (a, b) => [a - (b - a || 1) * 0.05, b + (b - a || 1) * 0.05];
  return [...pad(x0, x1), ...pad(y0, y1)];
}

function map(data, index, marked, readout) {
  const W = 560, H = 380, [x0, x1, y0, y1] = extent(data.points);
  const X = (x) => ((x - x0) / (x1 - x0)) * W, Y = (y) => H - ((y - y0) / (y1 - y0)) * H;
  const neighbours = new Set((data.neighbors[index][marked] || []).map(([t]) => t));
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "emb-map", role: "img",
    "aria-label": `2-D map of ${data.tokens.length} token embeddings at step ${data.steps[index]}` });
  data.points[index].forEach(([x, y], j) => {
    const token = data.tokens[j];
    const cls = token === marked ? "marked" : neighbours.has(token) ? "neighbour" : "";
    const g = s("g", { class: `emb-point ${cls}`, "data-token": token });
    g.append(s("circle", { cx: X(x), cy: Y(y), r: cls ? 4.5 : 2.5 }));
    if (j < LABELLED || cls) g.append(s("text", { x: X(x) + 5, y: Y(y) - 4 }, token));
    g.addEventListener("mouseover", () => { readout.textContent = `${token} (rank ${j + 1} by frequency) at (${fmtNumber(x, 3)}, ${fmtNumber(y, 3)})`; });
    svg.append(g);
  });
  return svg;
}

function neighbourTable(data, index, marked, onMark) {
  const rows = Object.entries(data.neighbors[index] || {});
  return h("table", { class: "emb-neighbours" },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "token"), h("th", { scope: "col" }, "nearest by cosine similarity"))),
    h("tbody", {}, rows.map(([token, near]) => h("tr", { class: token === marked ? "selected" : null, "data-token": token },
      h("th", { scope: "row" }, h("button", { type: "button", class: "link", onclick: () => onMark(token) }, token)),
      h("td", {}, near.map(([t, sim]) => `${t} ${fmtNumber(sim, 2)}`).join(", "))))));
}

/** The card for `path` (a job's or a model's embeddings route); polls while `live()`. */
export function embeddingsPanel(path, { signal, live = () => false, title = "Embeddings over training" } = {}) {
  const section = h("section", { class: "card", id: "embeddings" }, h("h2", {}, title),
    h("p", { class: "muted" }, "The shared embedding matrix, at each checkpoint: where the most frequent tokens sit "
      + "(a 2-D projection, PCA) and each watched token's nearest neighbours."));
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  section.append(body);
  let data = null, index = 0, marked = null;

  function draw() {
    if (!data || !data.steps.length) {
      clear(body, h("p", { class: "muted", id: "embeddings-empty" }, "No records yet: the first comes with the first checkpoint."));
      return;
    }
    marked = marked ?? Object.keys(data.neighbors[index] || {})[0] ?? null;
    const readout = h("p", { class: "heat-readout", "aria-live": "polite" }, "Hover a point for its token.");
    const slider = h("input", { type: "range", id: "embeddings-step", min: 0, max: data.steps.length - 1, value: index, "aria-label": "checkpoint" });
    const label = h("output", { for: "embeddings-step", id: "embeddings-step-label" }, `step ${data.steps[index]}`);
    const explained = data.explained[index] || [];
    const holder = h("div", { class: "emb-body" });
    const render = () => holder.replaceChildren(
      h("div", { class: "scroll-x" }, map(data, index, marked, readout)),
      neighbourTable(data, index, marked, (t) => { marked = t; render(); }));
    slider.addEventListener("input", () => { index = Number(slider.value); label.textContent = `step ${data.steps[index]}`; render(); });
    render();
    clear(body,
      h("div", { class: "dyn-controls" }, data.steps.length > 1 ? slider : null, label,
        h("span", { class: "muted" }, `axes keep ${explained.map((v) => `${Math.round(v * 100)}%`).join(" + ")} of the variance`)),
      holder, readout);
  }

  async function load() {
    try {
      const fresh = await api(path, { signal });
      const atEnd = !data || index >= data.steps.length - 1;  // following the newest (or nothing yet)
      if (data && fresh.steps.length === data.steps.length) return;
      data = fresh;
      if (atEnd) index = Math.max(0, data.steps.length - 1);
      draw();
    } catch (err) {
      if (err.name !== "AbortError") clear(body, errorBox(`Could not load the embeddings: ${err.message}`));
    }
  }

  load();
  section.refresh = load;
  const timer = setInterval(() => { if (live()) load(); }, POLL_MS);
  signal?.addEventListener("abort", () => clearInterval(timer));
  return section;
}
