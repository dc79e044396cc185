// The pipelines list (#/pipelines): each back-translation or distillation pipeline's name, kind, status, the step it
// is at (N/M name), the model it made and when it started, sortable by any column; a row opens the pipeline's page.
// Read again every few seconds (GET /v1/pipelines).

import { api } from "./api.js";
import { KIND_TEXT, currentStep } from "./pipelinechain.js";
import { sortable } from "./sortable.js";
import { clear, errorBox, field, fmtTime, h, shortId, statusBadge } from "./ui.js";

const PAGE = 100;  // the API's largest page
const REFRESH_MS = 4000;
const COLUMNS = ["Pipeline", "Kind", "Status", "Step", "Model", "Created"];

function pipelineRow(p) {
  const [n, step] = currentStep(p);
  const stepText = `${n}/${p.steps.length} ${step.name}`;
  return {
    attrs: { "data-pipeline": p.id, "data-status": p.status, class: "pipeline-row" },
    cells: [
      { sort: p.name.toLowerCase(), shown: [h("a", { href: `#/pipelines/${p.id}` }, p.name),
        h("div", { class: "muted small-link" }, shortId(p.id))] },
      { sort: p.kind, shown: KIND_TEXT[p.kind] || p.kind },
      { sort: p.status, shown: statusBadge(p.status) },
      { sort: p.status === "succeeded" ? p.steps.length + 1 : n,  // a pipeline that is done sorts after every step
        shown: [h("span", {}, stepText), p.status === "running" && step.status !== "running"
          ? h("small", { class: "waiting-note" }, step.status) : null] },
      { sort: p.model_id, shown: p.model_id
        ? h("a", { href: `#/models/${p.model_id}`, title: p.model_id, "data-link": "model" }, shortId(p.model_id))
        : h("span", { class: "muted" }, "–") },
      { sort: p.created_at, shown: fmtTime(p.created_at) },
    ],
  };
}

export function renderPipelines(container, query) {
  const params = new URLSearchParams((query || "").replace(/^\?/, ""));
  const filter = h("select", { id: "pipeline-status-filter" },
    ["", "running", "succeeded", "failed", "cancelled"].map((st) =>
      h("option", { value: st, selected: st === (params.get("status") || "") }, st || "all")));
  const note = h("div", { "aria-live": "polite" });
  const empty = h("p", { class: "muted pad", id: "pipelines-empty", hidden: true });
  const more = h("p", { class: "muted", id: "pipelines-more", hidden: true });
  const table = h("table", { class: "sortable pipelines-table", id: "pipelines-table" });
  const setRows = sortable(table, [], COLUMNS);
  table.prepend(h("caption", { class: "sr-only" }, "Pipelines"));
  // the row opens the pipeline, as its name does
  table.addEventListener("click", (e) => {
    const row = e.target.closest("tr[data-pipeline]");
    if (row && !e.target.closest("a, button")) location.hash = `#/pipelines/${row.dataset.pipeline}`;
  });
  clear(container,
    h("div", { class: "page-head" }, h("h1", {}, "Pipelines"), h("div", { class: "inline" }, field("Status", filter))),
    h("p", { class: "muted", id: "pipelines-help" },
      "A pipeline runs back-translation or distillation as a chain of ordinary jobs, dataset translations and datasets. ",
      "Start one with ", h("code", {}, "POST /v1/pipelines"), " or ", h("code", {}, "python -m app.cli pipeline FILE"),
      " (docs/api.md, Pipelines)."),
    note, h("div", { class: "card flush" }, table, empty), more);
  let timer = null, stopped = false, controller = null;
  async function load() {
    controller = new AbortController();
    const q = filter.value ? `&status=${filter.value}` : "";
    try {
      const page = await api(`/v1/pipelines?limit=${PAGE}${q}`, { signal: controller.signal });
      note.replaceChildren();
      setRows(page.data.map(pipelineRow));
      empty.hidden = page.data.length > 0;
      empty.textContent = q ? "No pipelines match this filter." : "No pipelines yet.";
      more.hidden = page.total <= page.data.length;
      more.textContent = `The newest ${page.data.length} of ${page.total} pipelines are shown.`;
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(`Could not load pipelines: ${err.message}`));
    }
    if (!stopped) timer = setTimeout(load, document.hidden ? 3 * REFRESH_MS : REFRESH_MS);
  }
  filter.addEventListener("change", () => {
    history.replaceState(null, "", filter.value ? `#/pipelines?status=${filter.value}` : "#/pipelines");
    clearTimeout(timer);
    controller?.abort();
    load();
  });
  load();
  return () => { stopped = true; clearTimeout(timer); controller?.abort(); };
}
