// Entry point: sign-in, hash routing (#/jobs, #/jobs/<id> and #/jobs/<id>/<panel> for its other panels, #/new,
// #/sweeps, #/sweeps/<id>, #/pipelines, #/pipelines/<id>, #/datasets, #/datasets/<id>, #/models, #/models/<id> and
// #/models/<id>/<panel>, #/workers, #/webhooks, #/audit), the jobs list.

import { applyScopes, clearMe, getMe, limitsNote, pageNeeds, scopeChips, setMe, watchScopes, whoText } from "./access.js";
import { api, clearKey, getKey, setKey } from "./api.js";
import { renderCompare } from "./compare.js";
import { renderDataset } from "./dataset.js";
import { renderDatasets } from "./datasets.js";
import { JOB_PANELS, renderJob } from "./job.js";
import { timeBudgetText, waitingFor } from "./joboverview.js";
import { tagChips } from "./labels.js";
import { renderExplain } from "./explain.js";
import { MODEL_PANELS, renderModel, renderModels } from "./model.js";
import { renderNewJob } from "./newjob.js";
import { renderPipeline } from "./pipeline.js";
import { renderPipelines } from "./pipelines.js";
import { renderSweep } from "./sweep.js";
import { renderSweeps } from "./sweeps.js";
import { renderGlossaries } from "./glossaries.js";
import { renderWebhooks } from "./webhooks.js";
import { renderAudit } from "./audit.js";
import { usagePanel } from "./usage.js";
import { renderWorkers } from "./workers.js";
import { clear, errorBox, field, fmtDuration, fmtNumber, fmtTime, h, progressBar, shortId, statusBadge } from "./ui.js";

const view = document.getElementById("view");
const nav = document.getElementById("nav");
const banner = document.getElementById("banner");
const access = document.getElementById("access");
let cleanup = null;  // the page shown: called to stop it; its showPanel(name), if any, opens another of its panels
let shown = null;  // [render, id] of that page

export function showBanner(message) {
  banner.textContent = message || "";
  banner.hidden = !message;
}

function renderSignIn(container, message) {
  nav.hidden = true;
  const input = h("input", { id: "api-key", type: "password", autocomplete: "off", required: true,
                             placeholder: "paste your API key", spellcheck: "false" });
  const status = h("div", { id: "signin-error", "aria-live": "assertive" });
  if (message) status.append(errorBox(message));
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h("form", { class: "card signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "Sign in"),
    h("p", { class: "muted" }, "Use an API key from ", h("code", {}, "python -m app.cli create-key NAME"),
      ", ", h("code", {}, "create-api-key"), " (or var/local-api-key). It is kept in this tab's session storage only. ",
      "The pages then show what the key may do: actions its scopes do not allow are hidden or disabled."),
    field("API key", input), status, button);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    status.replaceChildren();
    button.disabled = true;
    const key = input.value.trim();
    try {
      const me = await api("/v1/me", { key });
      setKey(key);
      setMe(me);
      route();
    } catch (err) {
      status.append(errorBox(`Sign-in failed: ${err.message}`));
    } finally {
      button.disabled = false;
    }
  });
  clear(container, form);
  input.focus();
  return null;
}

function renderJobs(container) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const filter = h("select", { id: "status-filter" },
    ["", "queued", "running", "succeeded", "failed", "cancelled", "pruned"].map((st) =>
      h("option", { value: st, selected: st === (params.get("status") || "") }, st || "all")));
  const tagFilter = h("input", { id: "tag-filter", value: params.get("tag") || "", placeholder: "any", size: 12 });
  const body = h("tbody");
  const note = h("div", { "aria-live": "polite" });
  const selected = new Set();  // ticked for comparison; kept across the list's refreshes
  const compare = h("button", { type: "button", id: "compare-selected", disabled: true }, "Compare");
  const showSelection = () => {
    compare.disabled = selected.size < 2 || selected.size > 10;
    compare.textContent = selected.size ? `Compare ${selected.size}` : "Compare";
  };
  compare.addEventListener("click", () => { location.hash = `#/compare?ids=${[...selected].join(",")}`; });
  body.addEventListener("change", (e) => {
    const box = e.target.closest("input[data-select]");
    if (!box) return;
    if (box.checked) selected.add(box.dataset.select); else selected.delete(box.dataset.select);
    showSelection();
  });
  const PAGE = 100;  // the API's largest page
  let pages = 1;  // pages shown; "Show more" adds one
  const more = h("button", { type: "button", id: "jobs-more", class: "secondary", hidden: true }, "Show more");
  more.addEventListener("click", () => { pages += 1; clearTimeout(timer); controller?.abort(); load(); });
  const table = h("table", { class: "jobs-table" },
    h("caption", { class: "sr-only" }, "Training jobs"),
    h("thead", {}, h("tr", {}, ["", "Job", "Objective", "Status", "Progress", "Step", "Tokens/s", "ETA", "Created"]
      .map((t) => h("th", { scope: "col" }, t)))), body);
  clear(container,
    h("div", { class: "page-head" }, h("h1", {}, "Jobs"),
      h("div", { class: "inline" }, field("Status", filter), field("Tag", tagFilter), compare,
        h("a", { class: "button", href: "#/new" }, "New job"))),
    note, usagePanel(), h("div", { class: "card flush" }, table), more);
  let timer = null, stopped = false, controller = null;
  async function load() {
    controller = new AbortController();
    const q = query();
    try {
      const jobs = [];
      let total = 0;
      for (let i = 0; i < pages && (i === 0 || jobs.length < total); i++) {
        const page = await api(`/v1/jobs?limit=${PAGE}&offset=${i * PAGE}${q}`, { signal: controller.signal });
        jobs.push(...page.data);
        total = page.total;
      }
      note.replaceChildren();
      body.replaceChildren(...jobs.map((job) => jobRow(job, selected.has(job.id))));
      more.hidden = jobs.length >= total;
      more.textContent = `Show ${Math.min(PAGE, total - jobs.length)} more (${jobs.length} of ${total} shown)`;
      if (!jobs.length) {
        body.append(h("tr", {}, h("td", { colspan: 9, class: "muted" },
          q ? "No jobs match these filters." : "No jobs yet. ", q ? "" : h("a", { href: "#/new" }, "Submit one."))));
      }
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(`Could not load jobs: ${err.message}`));
    }
    if (!stopped) timer = setTimeout(load, document.hidden ? 5000 : 2000);
  }
  function query() {
    const q = new URLSearchParams();
    if (filter.value) q.set("status", filter.value);
    if (tagFilter.value.trim()) q.set("tag", tagFilter.value.trim());
    return q.toString() ? `&${q}` : "";
  }
  function refilter() {
    pages = 1;
    const q = query();
    history.replaceState(null, "", q ? `#/jobs?${q.slice(1)}` : "#/jobs");
    clearTimeout(timer);
    controller?.abort();
    load();
  }
  filter.addEventListener("change", refilter);
  tagFilter.addEventListener("change", refilter);
  load();
  return () => { stopped = true; clearTimeout(timer); controller?.abort(); };
}

function jobRow(job, ticked) {
  const p = job.progress;
  return h("tr", { "data-job": job.id, "data-status": job.status },
    h("td", { "data-label": "Compare" }, h("input", {
      type: "checkbox", "data-select": job.id, checked: ticked, "aria-label": `compare ${job.name || shortId(job.id)}`,
    })),
    h("td", { "data-label": "Job" }, h("a", { href: `#/jobs/${job.id}` }, job.name || shortId(job.id)),
      job.model_id ? h("a", { class: "small-link", href: `#/models/${job.model_id}` }, " model") : null,
      job.sweep_id ? h("a", { class: "small-link", href: `#/sweeps/${job.sweep_id}` }, " sweep") : null,
      tagChips(job.tags)),
    h("td", { "data-label": "Objective" },
      h("div", {}, job.objective, h("span", { class: "muted" }, ` · ${job.model.preset}`)),
      job.dataset_name ? h("small", { class: "muted dataset-of-job" }, "on ",
        h("a", { href: `#/datasets/${job.dataset_id}` }, job.dataset_name)) : null),
    h("td", { "data-label": "Status" }, h("div", {}, statusBadge(job.status),
      waitingFor(job) ? h("small", { class: "waiting-note" }, `waiting for ${waitingFor(job)}`) : null)),
    h("td", { "data-label": "Progress" }, progressBar(p.fraction, `progress of job ${shortId(job.id)}`)),
    h("td", { "data-label": "Step" }, timeBudgetText(p)  // the time budget binds: minutes, then the step
      ? h("div", { class: "time-budget" }, timeBudgetText(p), h("small", { class: "muted" }, ` · step ${p.step}`))
      : `${p.step}/${p.total_steps}`),
    h("td", { "data-label": "Tokens/s" }, p.tokens_per_second ? fmtNumber(Math.round(p.tokens_per_second)) : "–"),
    h("td", { "data-label": "ETA" }, job.status === "running" ? fmtDuration(p.eta_seconds) : "–"),
    h("td", { "data-label": "Created" }, fmtTime(job.created_at)));
}

const panels = (names) => `(?:\\/(${names.join("|")}))?$`;  // a page's panel: the second group
const ROUTES = [
  [new RegExp(`^#\\/jobs\\/([\\w-]+)${panels(JOB_PANELS)}`), renderJob],
  [/^#\/jobs(\?.*)?$/, renderJobs],
  [/^#\/compare(\?.*)?$/, renderCompare],
  [/^#\/new(?:\?from=([\w-]+))?$/, renderNewJob],
  [/^#\/sweeps\/([\w-]+)$/, renderSweep],
  [/^#\/sweeps(\?.*)?$/, renderSweeps],
  [/^#\/pipelines\/([\w-]+)$/, renderPipeline],
  [/^#\/pipelines(\?.*)?$/, renderPipelines],
  [/^#\/datasets\/([\w-]+)$/, renderDataset],
  [/^#\/datasets$/, renderDatasets],
  [/^#\/models\/([\w.@-]+)\/explain$/, renderExplain],
  [new RegExp(`^#\\/models\\/([\\w.@-]+)${panels(MODEL_PANELS)}`), renderModel],  // an id, or name@version / name@alias
  [/^#\/models$/, renderModels],
  [/^#\/workers$/, renderWorkers],
  [/^#\/glossaries$/, renderGlossaries],
  [/^#\/webhooks$/, renderWebhooks],
  [/^#\/audit$/, renderAudit],
];

function route() {
  const hash = location.hash || "#/jobs";
  const found = ROUTES.map(([pattern, render]) => [render, hash.match(pattern)]).find(([, m]) => m);
  if (found && cleanup?.showPanel && shown?.[0] === found[0] && shown[1] === found[1][1] && getKey()) {
    cleanup.showPanel(found[1][2]);  // the same page: only another panel
    return;
  }
  if (cleanup) { cleanup(); cleanup = null; }
  shown = null;
  showBanner("");
  if (!getKey()) { cleanup = renderSignIn(view); return; }
  nav.hidden = false;
  showAccess();
  for (const a of nav.querySelectorAll("a")) a.classList.toggle("active", hash.startsWith(a.getAttribute("href")));
  const needs = pageNeeds(hash);
  if (needs) {
    clear(view, h("h1", {}, "Not with this key"), h("p", { id: "page-needs-scope" },
      `This page needs scope ${needs}; this key has ${getMe().scopes.join(", ") || "none"}. `,
      h("a", { href: "#/jobs" }, "Back to the jobs.")));
    return;
  }
  if (found) {
    const [render, m] = found;
    view.replaceChildren(h("p", { class: "muted" }, "Loading…"));
    cleanup = render(view, m[1], { showBanner, panel: m[2] }) || null;
    shown = [render, m[1]];
    return;
  }
  clear(view, h("h1", {}, "Not found"), h("p", {}, "No such page. ", h("a", { href: "#/jobs" }, "Back to the jobs.")));
}

/** Who is signed in and what the key may do, in the topbar and a line under it; the controls it may not use off. */
function showAccess() {
  const me = getMe();
  const who = document.getElementById("whoami");
  if (!me) { who.textContent = ""; access.replaceChildren(); access.hidden = true; return; }
  who.replaceChildren(whoText(me), " ", scopeChips(me));
  const note = limitsNote(me);
  access.replaceChildren(...(note ? [note] : []));
  access.hidden = !note;
  applyScopes(document.body);
}

async function refreshMe() {
  // A role changed since sign-in shows at the next page load; the API enforces it at once either way.
  if (!getKey()) return;
  try {
    setMe(await api("/v1/me"));
    showAccess();
  } catch { /* a refused key signs out through api-unauthorized */ }
}

watchScopes(document.body);
window.addEventListener("hashchange", route);
window.addEventListener("api-unauthorized", () => {
  clearKey();
  if (cleanup) { cleanup(); cleanup = null; }
  clearMe();
  showAccess();
  renderSignIn(view, "Your API key was refused (invalid, revoked or expired). Sign in again.");
});
document.getElementById("signout").addEventListener("click", () => {
  clearKey();
  clearMe();
  route();
});
route();
refreshMe();
