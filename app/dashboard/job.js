// Job page: status, progress (of the budget that binds: steps or minutes), live uPlot curves over Server-Sent
// Events, config, checkpoints, cancel, delete.

import { api, streamEvents } from "./api.js";
import { CurveChart } from "./curves.js";
import { dynamicsPanel } from "./dynamics.js";
import { embeddingsPanel } from "./embeddings.js";
import { labelsCard } from "./labels.js";
import { mountLogs } from "./logs.js";
import { memoryCard } from "./memory.js";
import { clear, errorBox, fmtBytes, fmtDuration, fmtNumber, fmtTime, h, progressBar, shortId, statusBadge } from "./ui.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled", "pruned"]);
const MIN_POINTS = 501, MAX_POINTS = 4001;  // a series' history: about 2 points (lowest, highest) a pixel column
const FOLLOW_MS = 10_000;  // how long a page opened at a card keeps it in view while the cards above it fill in
const WAITING_POLL_MS = 10000;  // the live events carry no waiting_for: re-read it this often while the job waits

// " en→de" when the job says what it translates (either side may be unknown: "?")
const languagePair = (job) => (job.source_language || job.target_language
  ? ` ${job.source_language || "?"}→${job.target_language || "?"}` : "");

function chartsFor(objective) {
  const series = (...list) => list.map(([name, label, color]) => ({ name, label, color }));
  return [
    { key: "loss", title: "Loss", series: series(["train_loss", "training", "#2563eb"], ["valid_loss", "validation", "#dc2626"]) },
    { key: "lr", title: "Learning rate", series: series(["lr", "learning rate", "#16a34a"]) },
    objective === "denoising"
      ? { key: "quality", title: "Masked-token accuracy", series: series(["masked_token_accuracy", "accuracy", "#9333ea"]) }
      : { key: "quality", title: "BLEU and chrF", series: series(["bleu", "BLEU", "#9333ea"], ["chrf", "chrF", "#0891b2"]) },
    { key: "speed", title: "Tokens per second", series: series(["tokens_per_second", "tokens/s", "#ea580c"]) },
  ];
}

/** "12.5 of 20 min" when the time budget binds (max_minutes ends the run before max_steps), else null. */
export function timeBudgetText(progress) {
  if (progress.bound_by !== "time" || !progress.budget_seconds) return null;
  const minutes = (seconds) => fmtNumber(Math.round(seconds / 6) / 10);
  return `${minutes(progress.elapsed_seconds ?? 0)} of ${minutes(progress.budget_seconds)} min`;
}

/** "name: value" lines of the settings that are set (a null override means "the preset's value"). */
function settingsText(settings) {
  return Object.entries(settings).filter(([, v]) => v !== null).map(([k, v]) => `${k}: ${v}`).join("\n");
}

/** What a job waits for: a queued one, the kind of worker it asked for ("a GPU worker") when none is running; a
 * running multi-host one, the hosts still to join it ("nodes: 1 of 2 joined"). */
export function waitingFor(job) {
  if (!job.waiting_for) return null;
  if (job.status === "queued") return job.waiting_for;
  return job.status === "running" && job.waiting_for.startsWith("nodes:") ? job.waiting_for : null;
}

function waitingNote(job) {
  const what = waitingFor(job);
  if (!what) return null;
  if (job.status === "running") {
    return h("p", { class: "waiting", id: "waiting-for" }, h("strong", {}, `Waiting for hosts, ${what}`),
      `: the job spans ${job.training.nodes} training workers of the same device kind. It trains once all have ` +
      "joined, and fails naming the missing ones if they do not join in time.");
  }
  return h("p", { class: "waiting", id: "waiting-for" }, h("strong", {}, `Waiting for ${what}`),
    `: the job asked for ${job.training.accelerator.toUpperCase()} workers only and none is running now. ` +
    "It stays queued and starts when one comes.");
}

/** A chosen value: on/off, a preset's name, or a number. */
function chosenValue(value) {
  if (typeof value === "boolean") return value ? "on" : "off";
  return typeof value === "string" ? value : fmtNumber(value);
}

/** The presets the worker weighed for the job: each one's batch tokens/s (how it was known) and its predicted loss. */
function presetCandidates(presetInputs) {
  if (!presetInputs) return null;
  const predicted = Object.fromEntries((presetInputs.predictions ?? []).map((p) => [p.preset, p]));
  const rows = presetInputs.candidates.map((c) => {
    const p = predicted[c.preset];
    const speed = c.tokens_per_second ? `${fmtNumber(Math.round(c.tokens_per_second))} tokens/s (${c.throughput})` : c.throughput;
    const fits = c.max_batch_tokens ? "" : " · does not fit";
    return `${c.preset}: ${speed}${p ? ` · ${fmtNumber(p.epochs)} epochs · predicted loss ${p.loss.toFixed(2)}` : ""}${fits}`;
  });
  return h("p", { class: "muted", id: "preset-candidates" }, `Presets weighed: ${rows.join("; ")}.`);
}

/** What the worker chose (from the time budget, the preset, whether it compiles the steps), and why; or what it
 * will choose. */
function autoSettingsView(auto) {
  if (!auto) return null;
  if (!auto.chosen) {
    return h("p", { class: "muted", id: "auto-settings" },
      `Chosen by the worker when the job starts: ${auto.fields.join(", ")}.`);
  }
  const inputs = auto.inputs;
  return h("div", { id: "auto-settings" },
    h("h3", {}, inputs ? "chosen from the time budget" : "chosen by the worker"),
    h("table", {},
      h("thead", {}, h("tr", {}, ["Setting", "Value", "Why"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, Object.entries(auto.chosen).map(([name, value]) => h("tr", {},
        h("td", { "data-label": "Setting" }, h("code", {}, name)),
        h("td", { "data-label": "Value" }, chosenValue(value)),
        h("td", { "data-label": "Why" }, auto.reasons?.[name] ?? "–"))))),
    presetCandidates(auto.preset_inputs),
    inputs ? h("p", { class: "muted" },
      `From ${fmtNumber(inputs.training_pairs ?? 0)} training pairs, a longest example of ${inputs.longest_example ?? "?"} tokens ` +
      `and ${fmtNumber(Math.round(inputs.tokens_per_second ?? 0))} batch tokens/s (${auto.throughput ?? "unknown"}` +
      `${auto.probe_seconds ? `, timed in ${auto.probe_seconds} s` : ""}).`) : null);
}

/** The job's page; `card` (dynamics, embeddings or memory: #/jobs/<id>/<card>) is scrolled to once it is placed. */
export function renderJob(container, jobId, { card } = {}) {
  const controller = new AbortController();
  const signal = controller.signal;
  const head = h("div", { class: "page-head" }, h("h1", {}, `Job ${shortId(jobId)}`));
  const summary = h("section", { class: "card", id: "job-summary", "aria-live": "polite" });
  const chartsGrid = h("section", { class: "charts", "aria-label": "training curves" });
  const liveNote = h("div", { id: "live-note", "aria-live": "polite" });
  const checkpoints = h("section", { class: "card", id: "checkpoints" }, h("h2", {}, "Checkpoints"));
  const config = h("section", { class: "card", id: "config" }, h("h2", {}, "Configuration"));
  const labels = h("div");
  const dynamics = h("div");
  clear(container, head, summary, liveNote, chartsGrid, dynamics, h("div", { class: "grid2 wide" }, checkpoints, config),
        labels);

  function renderHead() {
    head.replaceChildren(h("h1", {}, job.name ? `${job.name} ` : `Job ${shortId(jobId)}`,
      job.name ? h("small", { class: "muted" }, shortId(jobId)) : null));
  }

  function renderLabels() {
    renderHead();
    labels.replaceChildren(labelsCard(job, (saved) => {
      job = { ...job, name: saved.name, tags: saved.tags, note: saved.note };
      renderHead();
    }));
  }

  let job = null, charts = [], lastCheckpointStep = -1, refetching = false;

  function renderSummary(state) {
    const p = state.progress;
    const cancel = h("button", { type: "button", class: "danger", id: "cancel-job" }, "Cancel job");
    cancel.addEventListener("click", async () => {
      if (!confirm("Cancel this job? A running job stops within seconds.")) return;
      cancel.disabled = true;
      try {
        update(await api(`/v1/jobs/${jobId}/cancel`, { method: "POST" }));
      } catch (err) {
        liveNote.replaceChildren(errorBox(`Cancel failed: ${err.message}`));
        cancel.disabled = false;
      }
    });
    const remove = h("button", { type: "button", class: "danger", id: "delete-job" }, "Delete job");
    remove.addEventListener("click", async () => {
      const kept = state.model_id ? " The model it trained stays." : "";
      if (!confirm(`Delete this job with its metrics, logs and checkpoints?${kept}`)) return;
      remove.disabled = true;
      try {
        await api(`/v1/jobs/${jobId}`, { method: "DELETE" });
        location.hash = "#/jobs";
      } catch (err) {
        liveNote.replaceChildren(errorBox(`Not deleted: ${err.message}`));
        remove.disabled = false;
      }
    });
    clear(summary,
      h("div", { class: "summary-row" }, statusBadge(state.status),
        h("span", {}, `${job.objective}${languagePair(job)} · ${job.model.preset} · attempt ${state.attempt}/${job.max_attempts}`),
        job.device ? h("span", { class: "muted" }, job.device) : null,
        job.sweep_id ? h("a", { href: `#/sweeps/${job.sweep_id}`, id: "sweep-link" }, `trial #${job.trial_number} of its sweep`) : null,
        !TERMINAL.has(state.status) ? cancel : remove,
        state.model_id ? h("a", { class: "button", href: `#/models/${state.model_id}`, id: "model-link" }, "Open the model") : null),
      waitingNote(state),
      progressBar(p.fraction, timeBudgetText(p) ? "training progress by time" : "training progress"),
      h("dl", { class: "kv inline-kv" },
        timeBudgetText(p) ? [h("dt", { title: "max_minutes ends the run before max_steps" }, "time budget binds"),
          h("dd", { id: "time-budget" }, timeBudgetText(p))] : null,
        h("dt", {}, "step"), h("dd", {}, `${p.step} / ${p.total_steps}`),
        h("dt", {}, "tokens/s"), h("dd", {}, p.tokens_per_second ? fmtNumber(Math.round(p.tokens_per_second)) : "–"),
        h("dt", {}, "ETA"), h("dd", {}, state.status === "running" ? fmtDuration(p.eta_seconds) : "–"),
        h("dt", {}, "tokens seen"), h("dd", {}, fmtNumber(p.tokens_seen ?? 0)),
        h("dt", {}, "created"), h("dd", {}, fmtTime(job.created_at)),
        h("dt", {}, "finished"), h("dd", {}, fmtTime(job.finished_at))),
      state.cancel_requested && !TERMINAL.has(state.status) ? h("p", { class: "muted" }, "Cancel requested…") : null,
      state.error ? h("div", { class: "error-text", role: "alert" }, h("strong", {}, "Error: "), h("pre", {}, state.error)) : null);
  }

  function renderConfig() {
    clear(config, h("h2", {}, "Configuration"),
      h("dl", { class: "kv" }, h("dt", {}, "dataset"), h("dd", {}, h("code", {}, job.dataset_id || "–")),
        h("dt", {}, "validation"), h("dd", {}, h("code", {}, job.valid_dataset_id || "held out"))),
      autoSettingsView(job.auto_settings),
      h("h3", {}, "model"), h("pre", {}, settingsText(job.model)),
      h("h3", {}, "training"), h("pre", {}, settingsText(job.training)));
  }

  async function update(state) {
    const choicePending = job.auto_settings && !job.auto_settings.chosen;
    job = { ...job, ...state, progress: state.progress ?? job.progress };
    renderSummary(job);
    // The worker records its choice before the first step: reload the job once training has started or ended.
    if (choicePending && !refetching && (job.progress?.step > 0 || TERMINAL.has(job.status))) {
      refetching = true;
      try {
        job = await api(`/v1/jobs/${jobId}`, { signal });
        renderConfig();
      } catch (err) {
        if (err.name !== "AbortError") liveNote.replaceChildren(errorBox(err.message));
      } finally {
        refetching = false;
      }
    }
  }

  /** Whether the job may be waiting now or soon: for a kind of worker, or (multi-host) for its other hosts until its
   * first step. */
  function mayWait() {
    const gathering = job.training.nodes > 1 && !TERMINAL.has(job.status) && !(job.progress?.step > 0);
    return Boolean(waitingFor(job)) || gathering;
  }

  async function watchWaiting() {
    while (mayWait()) {
      await new Promise((resolve) => setTimeout(resolve, WAITING_POLL_MS));
      if (signal.aborted) return;
      try {
        const now = await api(`/v1/jobs/${jobId}`, { signal });
        if (job.status === "queued" || job.status === "running") {  // the events own the status; only the wait
          job = { ...job, waiting_for: now.waiting_for };
          renderSummary(job);
        }
      } catch (err) {
        if (err.name === "AbortError") return;
      }
    }
  }

  async function loadCheckpoints() {
    try {
      const rows = await api(`/v1/jobs/${jobId}/checkpoints`, { signal });
      const table = rows.length ? h("table", {},
        h("thead", {}, h("tr", {}, ["Step", "Metrics", "Size", "sha256", "Created"].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, rows.map((c) => h("tr", {},
          h("td", { "data-label": "Step" }, c.step),
          h("td", { "data-label": "Metrics" }, Object.entries(c.metrics).map(([k, v]) => `${k} ${fmtNumber(v)}`).join(", ") || "–"),
          h("td", { "data-label": "Size" }, fmtBytes(c.size_bytes)),
          h("td", { "data-label": "sha256" }, h("code", { title: c.sha256 }, c.sha256.slice(0, 12))),
          h("td", { "data-label": "Created" }, fmtTime(c.created_at)))))) : h("p", { class: "muted" }, "No checkpoints yet.");
      clear(checkpoints, h("h2", {}, "Checkpoints"), table);
    } catch (err) {
      if (err.name !== "AbortError") clear(checkpoints, h("h2", {}, "Checkpoints"), errorBox(err.message));
    }
  }

  let historyEventId = "";  // the stream starts after the points the history already holds
  async function loadHistory() {
    const names = charts.flatMap((c) => c.names()).join(",");
    const widest = Math.max(...charts.map((c) => c.width));
    const maxPoints = Math.max(MIN_POINTS, Math.min(MAX_POINTS, 2 * widest + 1));
    const { series, last_event_id } = await api(
      `/v1/jobs/${jobId}/metrics?names=${names}&max_points=${maxPoints}&downsample=extremes`, { signal });
    historyEventId = last_event_id ? String(last_event_id) : "";
    for (const chart of charts) chart.load(series);
  }

  // The cards around the one asked for (#/jobs/ID/memory) fill in as their data arrives and move it: scroll to it
  // again whenever the page changes size, until the reader scrolls or FOLLOW_MS pass.
  function followCard(showCard, above) {
    if (!card || !("ResizeObserver" in window)) return;
    const observer = new ResizeObserver(() => showCard());
    const stop = () => observer.disconnect();
    for (const el of above) observer.observe(el);
    for (const type of ["wheel", "touchstart", "keydown", "mousedown"]) window.addEventListener(type, stop, { once: true, signal });
    signal.addEventListener("abort", stop);
    setTimeout(stop, FOLLOW_MS);
  }

  async function start() {
    try {
      job = await api(`/v1/jobs/${jobId}`, { signal });
    } catch (err) {
      if (err.name !== "AbortError") clear(summary, errorBox(`Could not load job ${jobId}: ${err.message}`));
      return;
    }
    renderSummary(job);
    renderConfig();
    renderLabels();
    const dynamicsCard = dynamicsPanel(jobId, { signal, live: () => !TERMINAL.has(job.status) });
    const embeddingsCard = embeddingsPanel(`/v1/jobs/${jobId}/embeddings`, { signal, live: () => !TERMINAL.has(job.status) });
    dynamics.replaceChildren(dynamicsCard, embeddingsCard, memoryCard(jobId, { signal, live: () => !TERMINAL.has(job.status) }));
    const showCard = () => { if (card) document.getElementById(card)?.scrollIntoView({ block: "start" }); };
    showCard();
    followCard(showCard, [document.body]);
    const detail = async (names, from, to, maxPoints) => (await api(`/v1/jobs/${jobId}/metrics?names=${names.join(",")}` +
      `&since_step=${from}&until_step=${to}&max_points=${maxPoints}&downsample=extremes`, { signal })).series;
    charts = chartsFor(job.objective).map((c) => new CurveChart({ ...c, cap: MAX_POINTS, detail }));
    chartsGrid.replaceChildren(...charts.map((c) => c.el));
    for (const chart of charts) chart.mount();
    const byName = new Map(charts.flatMap((c) => c.names().map((name) => [name, c])));
    const t0 = performance.now();
    try {
      await loadHistory();
    } catch (err) {
      if (err.name === "AbortError") return;
      liveNote.replaceChildren(errorBox(`Could not load metrics: ${err.message}`));
    }
    await new Promise((resolve) => requestAnimationFrame(resolve));  // drawn: read, downsampled, painted
    showCard();  // again: the charts above it have their height now
    container.dataset.historyMs = String(Math.round(performance.now() - t0));
    loadCheckpoints();
    if (TERMINAL.has(job.status)) return;  // nothing live to watch
    watchWaiting();
    liveNote.replaceChildren(h("p", { class: "muted" }, "Live: following the job…"));
    await streamEvents(`/v1/jobs/${jobId}/events`, {
      signal, lastEventId: historyEventId,
      onEvent: (ev) => {
        if (ev.event === "metric") {
          const m = JSON.parse(ev.data);
          byName.get(m.name)?.append(m.name, m.step, m.value);
        } else if (ev.event === "progress") {
          const state = JSON.parse(ev.data);
          update(state);
          const step = state.progress?.step ?? 0;
          if (job.training.checkpoint_every && Math.floor(step / job.training.checkpoint_every) !== lastCheckpointStep) {
            lastCheckpointStep = Math.floor(step / job.training.checkpoint_every);
            loadCheckpoints();
          }
        } else if (ev.event === "end") {
          liveNote.replaceChildren(h("p", { class: "muted" }, `Finished: ${JSON.parse(ev.data).status}.`));
        }
      },
      onError: (err) => liveNote.replaceChildren(errorBox(`Live updates: ${err.message}`)),
    });
    if (signal.aborted) return;
    try {  // the final state, the model link, every checkpoint, and curves re-averaged by the API
      job = await api(`/v1/jobs/${jobId}`, { signal });
      renderSummary(job);
      await Promise.all([loadCheckpoints(), loadHistory(), dynamicsCard.refresh(), embeddingsCard.refresh()]);
    } catch (err) {
      if (err.name !== "AbortError") liveNote.replaceChildren(errorBox(err.message));
    }
  }

  start();
  mountLogs(container, jobId, signal);
  return () => controller.abort();
}
