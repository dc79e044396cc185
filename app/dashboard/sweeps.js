// The sweeps list (#/sweeps): each sweep's name, status, objective, trials by status, best value, worker minutes
// against its budget; a row opens the sweep's page. Read again every few seconds (GET /v1/sweeps, without trials).

import { api } from "./api.js";
import { trialCountBadges } from "./sweep.js";
import { clear, errorBox, field, fmtNumber, fmtTime, h } from "./ui.js";

const PAGE = 100;  // the API's largest page
const REFRESH_MS = 4000;

function sweepRow(sweep) {
  const started = Object.values(sweep.trial_counts).reduce((a, b) => a + b, 0);
  const arrow = sweep.direction === "maximize" ? "↑" : "↓";
  return h("tr", { "data-sweep": sweep.id, "data-status": sweep.status, class: "sweep-row" },
    h("td", { "data-label": "Sweep" }, h("a", { href: `#/sweeps/${sweep.id}` }, sweep.name),
      h("div", { class: "muted small-link" }, `${sweep.objective} · ${sweep.sampler} / ${sweep.pruner}`)),
    h("td", { "data-label": "Status" }, h("span", { class: `badge status-${sweep.status}` }, sweep.status)),
    h("td", { "data-label": "Metric" }, h("span", { title: sweep.direction }, `${sweep.metric} ${arrow}`)),
    h("td", { "data-label": "Trials" },
      h("div", {}, sweep.budget.trials ? `${started} of ${sweep.budget.trials}` : String(started)),
      trialCountBadges(sweep.trial_counts)),
    h("td", { "data-label": "Best", class: "num best-value" }, sweep.best ? fmtNumber(sweep.best.value) : "–"),
    h("td", { "data-label": "Worker min", class: "num" },
      sweep.budget.minutes ? `${fmtNumber(sweep.worker_minutes)} / ${fmtNumber(sweep.budget.minutes)}` : fmtNumber(sweep.worker_minutes)),
    h("td", { "data-label": "Created" }, fmtTime(sweep.created_at)));
}

export function renderSweeps(container, query) {
  const params = new URLSearchParams((query || "").replace(/^\?/, ""));
  const filter = h("select", { id: "sweep-status-filter" },
    ["", "running", "succeeded", "failed", "cancelled"].map((st) =>
      h("option", { value: st, selected: st === (params.get("status") || "") }, st || "all")));
  const body = h("tbody");
  const note = h("div", { "aria-live": "polite" });
  const more = h("p", { class: "muted", id: "sweeps-more", hidden: true });
  const table = h("table", { class: "sweeps-table" },
    h("caption", { class: "sr-only" }, "Hyperparameter sweeps"),
    h("thead", {}, h("tr", {}, ["Sweep", "Status", "Metric", "Trials", "Best", "Worker min", "Created"]
      .map((t) => h("th", { scope: "col" }, t)))), body);
  // the row opens the sweep, as its name does
  body.addEventListener("click", (e) => {
    const row = e.target.closest("tr[data-sweep]");
    if (row && !e.target.closest("a, button")) location.hash = `#/sweeps/${row.dataset.sweep}`;
  });
  clear(container,
    h("div", { class: "page-head" }, h("h1", {}, "Sweeps"),
      h("div", { class: "inline" }, field("Status", filter),
        h("a", { class: "button", href: "#/new", title: "a sweep starts from the new-job form: Sweep…" }, "New sweep"))),
    note, h("div", { class: "card flush" }, table), more);
  let timer = null, stopped = false, controller = null;
  async function load() {
    controller = new AbortController();
    const q = filter.value ? `&status=${filter.value}` : "";
    try {
      const page = await api(`/v1/sweeps?limit=${PAGE}${q}`, { signal: controller.signal });
      note.replaceChildren();
      body.replaceChildren(...page.data.map(sweepRow));
      more.hidden = page.total <= page.data.length;
      more.textContent = `The newest ${page.data.length} of ${page.total} sweeps are shown.`;
      if (!page.data.length) {
        body.append(h("tr", {}, h("td", { colspan: 7, class: "muted" }, q ? "No sweeps match this filter." : "No sweeps yet. ",
          q ? "" : h("a", { href: "#/new" }, "Start one from the new-job form (Sweep…)."))));
      }
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(`Could not load sweeps: ${err.message}`));
    }
    if (!stopped) timer = setTimeout(load, document.hidden ? 3 * REFRESH_MS : REFRESH_MS);
  }
  filter.addEventListener("change", () => {
    history.replaceState(null, "", filter.value ? `#/sweeps?status=${filter.value}` : "#/sweeps");
    clearTimeout(timer);
    controller?.abort();
    load();
  });
  load();
  return () => { stopped = true; clearTimeout(timer); controller?.abort(); };
}
