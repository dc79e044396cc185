// A sweep's page (#/sweeps/<id>): what it optimises and how (sampler, pruner, budget), what it has spent, why it
// stopped, a cancel button while it runs; the best trial with its settings and a link to its model; each setting's
// importance; every trial's objective over training (trials.js), the settings against the objective as parallel
// coordinates (parallel.js) and the trials table. Read from GET /v1/sweeps/{id} again every few seconds while the
// sweep runs.

import { api } from "./api.js";
import { bars } from "./charts.js";
import { parallelCoordinates } from "./parallel.js";
import { trialCurves, trialsTable } from "./trials.js";
import { clear, errorBox, fmtNumber, fmtTime, h, progressBar, shortId, statusBadge } from "./ui.js";

const REFRESH_MS = 3000, HIDDEN_REFRESH_MS = 10000;
const MIN_COMPLETE = 3;  // complete trials before the service weighs the settings (sweep_study.importance)

export const directionText = (d) => (d === "maximize" ? "higher is better" : "lower is better");

/** "3 trials · 30 worker minutes" */
export function budgetText(budget) {
  return [budget.trials !== null && budget.trials !== undefined ? `${budget.trials} trials` : null,
    budget.minutes !== null && budget.minutes !== undefined ? `${fmtNumber(budget.minutes)} worker minutes` : null]
    .filter(Boolean).join(" · ");
}

/** The trials by status as small badges: "2 succeeded", "1 pruned". */
export function trialCountBadges(counts) {
  const entries = Object.entries(counts || {});
  if (!entries.length) return h("span", { class: "muted" }, "none yet");
  return h("span", { class: "trial-counts" }, entries.map(([st, n]) =>
    h("span", { class: `badge status-${st}`, "data-status": st }, `${n} ${st}`)));
}

/** "training.lr_scale: float 0.1 – 3, log" */
function dimensionText(dim) {
  if (dim.type === "choice") return `one of ${dim.values.map(String).join(", ")}`;
  const step = dim.type === "int" && dim.step > 1 ? `, step ${dim.step}` : "";
  return `${dim.type} ${fmtNumber(dim.low)} – ${fmtNumber(dim.high)}${dim.log ? ", log" : ""}${step}`;
}

/** How far the budget is spent: the larger of trials started and worker minutes committed. */
function spentFraction(sweep) {
  const started = sweep.trials?.length ?? Object.values(sweep.trial_counts).reduce((a, b) => a + b, 0);
  return Math.max(sweep.budget.trials ? started / sweep.budget.trials : 0,
                  sweep.budget.minutes ? sweep.worker_minutes / sweep.budget.minutes : 0);
}

/** The sweep's head; `spaceOpen` keeps the search space unfolded across refreshes when the reader unfolded it. */
function summaryCard(sweep, onCancel, spaceOpen) {
  const running = sweep.status === "running";
  const cancel = h("button", { type: "button", class: "danger", id: "cancel-sweep" }, "Cancel sweep");
  cancel.addEventListener("click", () => onCancel(cancel));
  const started = sweep.trials?.length ?? 0;
  return h("section", { class: "card", id: "sweep-summary", "aria-live": "polite" },
    h("div", { class: "summary-row" }, statusBadge(sweep.status),
      h("span", {}, `${sweep.objective} · optimises `, h("strong", { id: "sweep-metric" }, sweep.metric),
        ` (${sweep.direction}: ${directionText(sweep.direction)})`),
      running && !sweep.cancel_requested ? cancel : null),
    running ? progressBar(spentFraction(sweep), "budget spent") : null,
    h("dl", { class: "kv inline-kv" },
      h("dt", {}, "sampler"), h("dd", { id: "sweep-sampler" }, `${sweep.sampler} (seed ${sweep.seed})`),
      h("dt", {}, "pruner"), h("dd", { id: "sweep-pruner" }, sweep.pruner),
      h("dt", {}, "budget"), h("dd", { id: "sweep-budget" }, budgetText(sweep.budget)),
      h("dt", {}, "worker minutes"), h("dd", { id: "sweep-minutes" }, sweep.budget.minutes
        ? `${fmtNumber(sweep.worker_minutes)} of ${fmtNumber(sweep.budget.minutes)}` : fmtNumber(sweep.worker_minutes)),
      h("dt", {}, "trials"), h("dd", {}, sweep.budget.trials ? `${started} of ${sweep.budget.trials} started` : `${started} started`,
        " ", trialCountBadges(sweep.trial_counts)),
      h("dt", {}, "at once"), h("dd", {}, `at most ${sweep.max_concurrent_trials}`),
      h("dt", {}, "compared by"), h("dd", {}, sweep.resource === "seconds" ? "seconds of training" : "steps"),
      h("dt", {}, "created"), h("dd", {}, fmtTime(sweep.created_at)),
      h("dt", {}, "finished"), h("dd", {}, fmtTime(sweep.finished_at))),
    h("details", { id: "sweep-space", open: spaceOpen }, h("summary", {}, `Search space (${Object.keys(sweep.space).length} settings)`),
      h("dl", { class: "kv" }, Object.entries(sweep.space).flatMap(([name, dim]) =>
        [h("dt", {}, h("code", {}, name)), h("dd", {}, dimensionText(dim))]))),
    sweep.cancel_requested && running ? h("p", { class: "muted" }, "Cancel requested: running trials stop within seconds…") : null,
    sweep.stop_reason ? h("p", { id: "sweep-stop-reason", class: running ? "waiting" : "muted" },
      h("strong", {}, running ? "No more trials start: " : "Stopped: "), sweep.stop_reason) : null,
    sweep.error ? h("div", { class: "error-text", role: "alert", id: "sweep-error" }, h("strong", {}, "Error: "), h("pre", {}, sweep.error)) : null);
}

function bestCard(sweep) {
  const best = sweep.best;
  const card = h("section", { class: "card", id: "sweep-best" }, h("h2", {}, "Best trial"));
  if (!best) return clear(card, h("h2", {}, "Best trial"), h("p", { class: "muted" }, "No trial has completed yet."));
  const ref = best.model_ref ? h("span", { class: "muted" }, "registered as ", h("code", { id: "best-model-ref" }, best.model_ref)) : null;
  return clear(card, h("h2", {}, "Best trial ",
      best.job_id ? h("a", { href: `#/jobs/${best.job_id}`, id: "best-trial-link" }, `#${best.number}`) : `#${best.number}`),
    h("p", { class: "big-number", id: "best-value" }, `${sweep.metric} ${fmtNumber(best.value)}`),
    h("dl", { class: "kv", id: "best-params" }, Object.entries(best.params).flatMap(([k, v]) =>
      [h("dt", {}, h("code", {}, k)), h("dd", {}, typeof v === "number" ? fmtNumber(v) : String(v))])),
    best.model_id ? h("div", { class: "actions" },
      h("a", { class: "button", id: "best-model-link", href: `#/models/${best.model_id}` }, "Open best model"), ref)
      : h("p", { class: "muted" }, "Its model is not published yet."));
}

function importanceCard(sweep) {
  const card = h("section", { class: "card", id: "sweep-importance" }, h("h2", {}, "Importance of each setting"));
  const shares = Object.entries(sweep.importance || {}).sort((a, b) => b[1] - a[1]);
  if (!sweep.importance || !shares.length) {
    const complete = sweep.trials.filter((t) => t.value !== null).length;
    card.append(h("p", { class: "muted", id: "importance-needs" },
      `Importance needs ${MIN_COMPLETE} complete trials that differ (${complete} complete so far).`));
    return card;
  }
  card.append(bars(shares.map(([label, value]) => ({ label, value })),
    { max: 1, ariaLabel: "importance of each setting", format: (v) => `${(100 * v).toFixed(1)}%` }),
  h("p", { class: "muted" }, `Each setting's share of the variation of ${sweep.metric} over the complete trials (PED-ANOVA).`));
  return card;
}

export function renderSweep(container, sweepId) {
  const controller = new AbortController();
  const signal = controller.signal;
  const title = h("h1", {}, `Sweep ${shortId(sweepId)}`);
  const note = h("div", { id: "sweep-note", "aria-live": "polite" });
  const summary = h("div"), best = h("div"), importance = h("div"), curves = h("div"), parallel = h("div"), trials = h("div");
  clear(container, h("div", { class: "page-head" }, title,
    h("a", { class: "small-link", href: "#/sweeps" }, "All sweeps")), note, summary,
  h("div", { class: "grid2 wide sweep-cards" }, best, importance), curves, parallel, trials);
  let table = null, chart = null, parallelKey = "", timer = null;

  async function cancel(button) {
    if (!confirm("Cancel this sweep? No further trial starts and its running trials stop.")) return;
    button.disabled = true;
    try {
      show(await api(`/v1/sweeps/${sweepId}/cancel`, { method: "POST", signal }));
    } catch (err) {
      if (err.name !== "AbortError") note.replaceChildren(errorBox(`Cancel failed: ${err.message}`));
      button.disabled = false;
    }
  }

  function show(sweep) {
    title.replaceChildren(`Sweep ${sweep.name} `, h("span", { class: "muted small-link" }, shortId(sweep.id)));
    container.dataset.status = sweep.status;
    summary.replaceChildren(summaryCard(sweep, cancel, Boolean(summary.querySelector("#sweep-space")?.open)));
    best.replaceChildren(bestCard(sweep));
    importance.replaceChildren(importanceCard(sweep));
    if (!chart) {
      chart = trialCurves(sweep);
      curves.replaceChildren(chart.el);
      chart.mount();
    } else {
      chart.update(sweep);
    }
    const key = JSON.stringify([sweep.best?.number, sweep.trials.map((t) => [t.status, t.value, t.best_value])]);
    if (key !== parallelKey) {  // redrawn only when a line changes: a hovered line keeps its readout
      parallelKey = key;
      parallel.replaceChildren(parallelCoordinates(sweep, {
        onOpen: (t) => { if (t.job_id) location.hash = `#/jobs/${t.job_id}`; } }));
    }
    if (!table) {
      table = trialsTable(sweep);
      trials.replaceChildren(table.el);
    } else {
      table.update(sweep);
    }
  }

  async function load() {
    let sweep;
    try {
      sweep = await api(`/v1/sweeps/${sweepId}`, { signal });
      note.replaceChildren(sweep.status === "running" ? h("p", { class: "muted" }, "Live: read again every few seconds…") : "");
      show(sweep);
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(`Could not load sweep ${sweepId}: ${err.message}`));
      if (err.status === 404) return;
    }
    if (!signal.aborted && (!sweep || sweep.status === "running")) {
      timer = setTimeout(load, document.hidden ? HIDDEN_REFRESH_MS : REFRESH_MS);
    }
  }
  load();
  return () => { controller.abort(); clearTimeout(timer); };
}
