// Job page: its head (name, status) over panels, each with a link of its own (#/jobs/<id> the overview,
// #/jobs/<id>/<panel> the others) and reading its data only once it is opened: overview (status, progress, live
// curves, checkpoints, labels: joboverview.js), data and settings (jobsettings.js), training dynamics, embeddings,
// memory of a step, evaluations of the model it trained, and the log.

import { api } from "./api.js";
import { dynamicsPanel } from "./dynamics.js";
import { embeddingsPanel } from "./embeddings.js";
import { evaluationsPanel } from "./evaluations.js";
import { mountOverview, TERMINAL, waitingFor } from "./joboverview.js";
import { mountSettings } from "./jobsettings.js";
import { mountLogs } from "./logs.js";
import { memoryCard } from "./memory.js";
import { panelTabs } from "./tabs.js";
import { clear, errorBox, h, shortId, statusBadge } from "./ui.js";

const STATUS_POLL_MS = 5000;  // the job's state while no events stream (the overview was not opened)
const WAITING_POLL_MS = 10000;  // the live events carry no waiting_for: re-read it this often while the job waits
export const JOB_PANELS = ["settings", "dynamics", "embeddings", "memory", "evaluations", "log"];  // beside the overview

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The evaluations of the model the job trained, once it has one (the model's page has them too). */
function mountEvaluations(el, page) {
  let shown;  // the model whose evaluations are in the panel (null: none yet)
  function draw(job) {
    if ((job.model_id ?? null) === shown) return;
    shown = job.model_id ?? null;
    const testSet = job.test_dataset_id ? h("a", { href: `#/datasets/${job.test_dataset_id}` }, "test set") : null;
    if (!shown) {
      clear(el, h("section", { class: "card", id: "evaluations" }, h("h2", {}, "Evaluations"),
        h("p", { class: "muted", id: "evaluations-waiting" }, job.status === "succeeded"
          ? "The model this job trained was deleted, and its evaluations with it."
          : TERMINAL.has(job.status) ? "This job ended without a model: there is nothing to evaluate."
            : ["Evaluations score the model this job trains, once it has succeeded",
              testSet ? [": its ", testSet, " is scored then by itself."] : "."])));
      return;
    }
    clear(el, h("p", { class: "muted" }, "The evaluations of ",
      h("a", { href: `#/models/${shown}`, id: "evaluations-model" }, "the model this job trained"), ", as on its page",
      testSet ? [" (the one marked “its job's” scored the job's ", testSet, " when training ended)."] : "."),
      evaluationsPanel(shown, page.signal, job.pairs));
  }
  draw(page.job);
  return { changed: draw };
}

/** The job's page; `panel` (one of JOB_PANELS, or none: the overview) is the one shown. */
export function renderJob(container, jobId, { panel } = {}) {
  const controller = new AbortController();
  const signal = controller.signal;
  const title = h("h1", {}, `Job ${shortId(jobId)}`);
  const status = h("span", { id: "job-status", "aria-live": "polite" });
  const note = h("div", { id: "job-page-note", "aria-live": "polite" });
  const head = h("div", { class: "page-head" }, h("div", { class: "job-title" }, title, status));
  clear(container, head, h("p", { class: "muted" }, "Loading…"));
  // What the panels share: the job as last read, merged with the live events while the overview streams them.
  const page = { id: jobId, signal, container, job: null, streaming: false, update, reload };
  let tabs = null, ended = false, refetching = false;

  function changed() {
    const job = page.job;
    clear(title, job.name ? `${job.name} ` : `Job ${shortId(jobId)}`, job.name ? h("small", { class: "muted" }, shortId(jobId)) : null);
    status.replaceChildren(statusBadge(job.status));
    tabs.each((hooks) => hooks.changed?.(job));
  }

  /** Merge a partial state (a progress event, the answer to a cancel, saved labels) into the job. */
  function update(state) {
    const choicePending = page.job.auto_settings && !page.job.auto_settings.chosen;
    page.job = { ...page.job, ...state, progress: state.progress ?? page.job.progress };
    changed();
    // The worker records its choice before the first step: read the job again once training has started or ended.
    if (choicePending && !refetching && (page.job.progress?.step > 0 || TERMINAL.has(page.job.status))) {
      refetching = true;
      reload().catch((err) => { if (err.name !== "AbortError") note.replaceChildren(errorBox(err.message)); })
        .finally(() => { refetching = false; });
    }
  }

  /** Read the job again (only what the events do not carry, `waiting_for`, while they stream); once it is over, the
   * panels read their last records. */
  async function reload(waitingOnly = false) {
    const now = await api(`/v1/jobs/${jobId}`, { signal });
    page.job = waitingOnly ? { ...page.job, waiting_for: now.waiting_for } : now;
    note.replaceChildren();
    changed();
    if (!waitingOnly && !ended && TERMINAL.has(now.status)) {
      ended = true;
      tabs.each((hooks) => hooks.ended?.());
    }
  }

  /** Whether the job may be waiting now or soon: for a kind of worker, or (multi-host) for its other hosts until its
   * first step. */
  function mayWait() {
    const job = page.job;
    const gathering = job.training.nodes > 1 && !TERMINAL.has(job.status) && !(job.progress?.step > 0);
    return Boolean(waitingFor(job)) || gathering;
  }

  async function watchJob() {
    while (!ended && !signal.aborted) {
      await sleep(page.streaming ? WAITING_POLL_MS : STATUS_POLL_MS);
      if (ended || signal.aborted || (page.streaming && !mayWait())) continue;
      try {
        await reload(page.streaming);
      } catch (err) {
        if (err.name !== "AbortError") note.replaceChildren(errorBox(`Could not read the job: ${err.message}`));
      }
    }
  }

  function panels(job) {
    const live = () => !TERMINAL.has(page.job.status);
    // A card that polls while the job is live reads its last records when it ends (and draws, once shown again,
    // what came while it was hidden).
    const card = (make) => (el) => {
      const section = make();
      clear(el, section);
      return { ended: () => section.refresh?.(), shown: () => section.shown?.() };
    };
    return [
      { name: "overview", title: "Overview", mount: (el) => mountOverview(el, page) },
      { name: "settings", title: "Data and settings", mount: (el) => mountSettings(el, page.job) },
      { name: "dynamics", title: "Dynamics", mount: card(() => dynamicsPanel(jobId, { signal, live })) },
      { name: "embeddings", title: "Embeddings",
        mount: card(() => embeddingsPanel(`/v1/jobs/${jobId}/embeddings`, { signal, live })) },
      { name: "memory", title: "Memory", mount: card(() => memoryCard(jobId, { signal, live })) },
      job.objective === "translation" ? { name: "evaluations", title: "Evaluations", mount: (el) => mountEvaluations(el, page) } : null,
      { name: "log", title: "Log", mount: (el) => mountLogs(el, jobId, signal) },
    ].filter(Boolean);
  }

  async function start() {
    try {
      page.job = await api(`/v1/jobs/${jobId}`, { signal });
    } catch (err) {
      if (err.name !== "AbortError") clear(container, head, errorBox(`Could not load job ${jobId}: ${err.message}`));
      return;
    }
    ended = TERMINAL.has(page.job.status);
    tabs = panelTabs({ label: "Job", panels: panels(page.job),
      href: (name) => (name === "overview" ? `#/jobs/${jobId}` : `#/jobs/${jobId}/${name}`) });
    clear(container, head, note, tabs.el);
    changed();
    tabs.show(panel);
    watchJob();
  }

  start();
  const stop = () => controller.abort();
  stop.showPanel = (name) => {  // the same job, another panel (a tab, back or forward): the page stays
    panel = name;
    tabs?.show(name);
  };
  return stop;
}
