// The job page's overview panel: status and progress (of the budget that binds: steps or minutes), cancel and delete,
// live uPlot curves over Server-Sent Events, the checkpoints and the job's labels.

import { api, streamEvents } from "./api.js";
import { CurveChart } from "./curves.js";
import { labelsCard } from "./labels.js";
import { COLORS } from "./plots.js";
import { clear, errorBox, fmtBytes, fmtDuration, fmtNumber, fmtTime, h, progressBar } from "./ui.js";

export const TERMINAL = new Set(["succeeded", "failed", "cancelled", "pruned"]);
const MIN_POINTS = 501, MAX_POINTS = 4001;  // a series' history: about 2 points (lowest, highest) a pixel column

/** A job of several language pairs: each pair's name in its metrics ("en-fr"), in the job's order. */
export const pairNames = (job) => (job.pairs || []).map((p) => `${p.source_language}-${p.target_language}`);

// " en→de" when the job says what it translates (either side may be unknown: "?"); every pair of a job of pairs
const languagePair = (job) => (job.pairs ? ` ${job.pairs.map((p) => `${p.source_language}→${p.target_language}`).join(", ")}`
  : job.source_language || job.target_language ? ` ${job.source_language || "?"}→${job.target_language || "?"}` : "");

/** A job of several pairs: a chart of each validation metric with a curve a pair, and the pairs' mean in black. */
function pairCharts(job) {
  const pairs = pairNames(job);
  if (!pairs.length) return [];
  const byPair = (metric) => [...pairs.map((pair, i) => ({ name: `${metric}/${pair}`, label: pair, color: COLORS[i % COLORS.length] })),
    { name: metric, label: "mean", color: "#111827" }];
  return [
    { key: "pair-bleu", title: "BLEU by language pair", series: byPair("bleu") },
    { key: "pair-chrf", title: "chrF by language pair", series: byPair("chrf") },
    { key: "pair-loss", title: "Validation loss by language pair", series: byPair("valid_loss") },
  ];
}

function chartsFor(job) {
  const { objective } = job;
  const series = (...list) => list.map(([name, label, color]) => ({ name, label, color }));
  return [
    { key: "loss", title: "Loss", series: series(["train_loss", "training", "#2563eb"], ["valid_loss", "validation", "#dc2626"]) },
    { key: "lr", title: "Learning rate", series: series(["lr", "learning rate", "#16a34a"]) },
    objective === "denoising"
      ? { key: "quality", title: "Masked-token accuracy", series: series(["masked_token_accuracy", "accuracy", "#9333ea"]) }
      : { key: "quality", title: job.pairs ? "BLEU and chrF, mean of the pairs" : "BLEU and chrF", series: series(["bleu", "BLEU", "#9333ea"], ["chrf", "chrF", "#0891b2"]) },
    { key: "speed", title: "Tokens per second", series: series(["tokens_per_second", "tokens/s", "#ea580c"]) },
    ...pairCharts(job),
  ];
}

/** "12.5 of 20 min" when the time budget binds (max_minutes ends the run before max_steps), else null. */
export function timeBudgetText(progress) {
  if (progress.bound_by !== "time" || !progress.budget_seconds) return null;
  const minutes = (seconds) => fmtNumber(Math.round(seconds / 6) / 10);
  return `${minutes(progress.elapsed_seconds ?? 0)} of ${minutes(progress.budget_seconds)} min`;
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

/**
 * Build the overview in `el`. `page` is the job page (job.js): its `job`, `update(state)` and `reload()`, and
 * `streaming`, set here while the events stream runs (the page reads the job itself otherwise).
 */
export function mountOverview(el, page) {
  const { id: jobId, signal } = page;
  const summary = h("section", { class: "card", id: "job-summary", "aria-live": "polite" });
  const liveNote = h("div", { id: "live-note", "aria-live": "polite" });
  const chartsGrid = h("section", { class: "charts", "aria-label": "training curves" });
  const checkpoints = h("section", { class: "card", id: "checkpoints" }, h("h2", {}, "Checkpoints"));
  const labels = labelsCard(page.job, (saved) => page.update({ name: saved.name, tags: saved.tags, note: saved.note }));
  clear(el, summary, liveNote, chartsGrid, h("div", { class: "grid2 wide overview-foot" }, checkpoints, labels));
  let charts = [], lastCheckpointStep = -1;

  function renderSummary(job) {
    const p = job.progress;
    const cancel = h("button", { type: "button", class: "danger", id: "cancel-job" }, "Cancel job");
    cancel.addEventListener("click", async () => {
      if (!confirm("Cancel this job? A running job stops within seconds.")) return;
      cancel.disabled = true;
      try {
        page.update(await api(`/v1/jobs/${jobId}/cancel`, { method: "POST" }));
      } catch (err) {
        liveNote.replaceChildren(errorBox(`Cancel failed: ${err.message}`));
        cancel.disabled = false;
      }
    });
    const remove = h("button", { type: "button", class: "danger", id: "delete-job" }, "Delete job");
    remove.addEventListener("click", async () => {
      const kept = job.model_id ? " The model it trained stays." : "";
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
      h("div", { class: "summary-row" },  // the status is in the page's head, over every panel
        h("span", {}, `${job.objective}${languagePair(job)} · ${job.model.preset} · attempt ${job.attempt}/${job.max_attempts}`),
        job.device ? h("span", { class: "muted" }, job.device) : null,
        job.sweep_id ? h("a", { href: `#/sweeps/${job.sweep_id}`, id: "sweep-link" }, `trial #${job.trial_number} of its sweep`) : null,
        !TERMINAL.has(job.status) ? cancel : remove,
        job.model_id ? h("a", { class: "button", href: `#/models/${job.model_id}`, id: "model-link" }, "Open the model") : null),
      waitingNote(job),
      progressBar(p.fraction, timeBudgetText(p) ? "training progress by time" : "training progress"),
      h("dl", { class: "kv inline-kv" },
        timeBudgetText(p) ? [h("dt", { title: "max_minutes ends the run before max_steps" }, "time budget binds"),
          h("dd", { id: "time-budget" }, timeBudgetText(p))] : null,
        h("dt", {}, "step"), h("dd", {}, `${p.step} / ${p.total_steps}`),
        h("dt", {}, "tokens/s"), h("dd", {}, p.tokens_per_second ? fmtNumber(Math.round(p.tokens_per_second)) : "–"),
        h("dt", {}, "ETA"), h("dd", {}, job.status === "running" ? fmtDuration(p.eta_seconds) : "–"),
        h("dt", {}, "tokens seen"), h("dd", {}, fmtNumber(p.tokens_seen ?? 0)),
        h("dt", {}, "created"), h("dd", {}, fmtTime(job.created_at)),
        h("dt", {}, "finished"), h("dd", {}, fmtTime(job.finished_at))),
      job.cancel_requested && !TERMINAL.has(job.status) ? h("p", { class: "muted" }, "Cancel requested…") : null,
      job.error ? h("div", { class: "error-text", role: "alert" }, h("strong", {}, "Error: "), h("pre", {}, job.error)) : null);
  }

  async function loadCheckpoints() {
    try {
      const rows = await api(`/v1/jobs/${jobId}/checkpoints`, { signal });
      const table = rows.length ? h("table", {},
        h("thead", {}, h("tr", {}, ["Step", "Metrics", "Size", "sha256", "Created"].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, rows.map((c) => h("tr", {},
          h("td", { "data-label": "Step" }, c.step),
          h("td", { "data-label": "Metrics" }, Object.entries(c.metrics)  // a pair's own ("bleu/en-fr") are in its charts
            .filter(([k]) => !k.includes("/")).map(([k, v]) => `${k} ${fmtNumber(v)}`).join(", ") || "–"),
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

  function onEvent(ev, byName) {
    if (ev.event === "metric") {
      const m = JSON.parse(ev.data);
      byName.get(m.name)?.append(m.name, m.step, m.value);
    } else if (ev.event === "progress") {
      const state = JSON.parse(ev.data);
      page.update(state);
      const step = state.progress?.step ?? 0, every = page.job.training.checkpoint_every;
      if (every && Math.floor(step / every) !== lastCheckpointStep) {
        lastCheckpointStep = Math.floor(step / every);
        loadCheckpoints();
      }
    } else if (ev.event === "end") {
      liveNote.replaceChildren(h("p", { class: "muted" }, `Finished: ${JSON.parse(ev.data).status}.`));
    }
  }

  async function start() {
    renderSummary(page.job);
    const detail = async (names, from, to, maxPoints) => (await api(`/v1/jobs/${jobId}/metrics?names=${names.join(",")}` +
      `&since_step=${from}&until_step=${to}&max_points=${maxPoints}&downsample=extremes`, { signal })).series;
    charts = chartsFor(page.job).map((c) => new CurveChart({ ...c, cap: MAX_POINTS, detail }));
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
    page.container.dataset.historyMs = String(Math.round(performance.now() - t0));
    loadCheckpoints();
    if (TERMINAL.has(page.job.status)) return;  // nothing live to watch
    liveNote.replaceChildren(h("p", { class: "muted" }, "Live: following the job…"));
    page.streaming = true;
    await streamEvents(`/v1/jobs/${jobId}/events`, {
      signal, lastEventId: historyEventId, onEvent: (ev) => onEvent(ev, byName),
      onError: (err) => liveNote.replaceChildren(errorBox(`Live updates: ${err.message}`)),
    });
    page.streaming = false;
    if (signal.aborted) return;
    try {  // the final state, the model link, every checkpoint, and curves re-averaged by the API
      await page.reload();
      await Promise.all([loadCheckpoints(), loadHistory()]);
    } catch (err) {
      if (err.name !== "AbortError") liveNote.replaceChildren(errorBox(err.message));
    }
  }

  start();
  return { changed: renderSummary };
}
