// A pipeline's page (#/pipelines/<id>): its name, kind and status, what it started from and the model it made, its
// error; Cancel while it runs, Retry once it failed, Delete once it is over; its steps drawn as a chain
// (pipelinechain.js) with each failed step's error and earlier attempts under it. Read from GET /v1/pipelines/{id}
// again every few seconds while the pipeline runs.

import { api } from "./api.js";
import { KIND_TEXT, currentStep, objectLink, stepChain, stepNotes } from "./pipelinechain.js";
import { clear, errorBox, fmtNumber, fmtTime, h, shortId, statusBadge } from "./ui.js";

const REFRESH_MS = 3000, HIDDEN_REFRESH_MS = 10000;

/** What the pipeline started from, as its settings name them: [label, value] rows. */
function inputs(p) {
  const s = p.settings || {};
  const dataset = (id) => (id ? objectLink("dataset", id) : null);
  const model = (id) => (id ? objectLink("model", id) : null);
  const share = (x) => (x === null || x === undefined ? null : `${fmtNumber(100 * x)}%`);
  const rows = p.kind === "backtranslation" ? [
    ["real pairs", dataset(s.dataset_id)],
    ["target-language text", dataset(s.monolingual_dataset_id)],
    ["reverse model", model(s.reverse_model_id || p.steps.find((st) => st.name === "reverse")?.output?.model_id)
      || "step 1 trains it"],
    ["tag", s.tag ? h("code", {}, s.tag) : "none"],
    ["real pairs' share", share(s.real_share)],
  ] : [
    ["teacher", model(s.teacher_model_id)],
    ["pairs", dataset(s.dataset_id)],
    ["original pairs' share", share(s.original_share)],
    ["student's start", s.student_init === "teacher" ? "the teacher's layers (shrink and fine-tune)" : "fresh weights"],
  ];
  const languages = s.languages?.source || s.languages?.target
    ? `${s.languages.source || "?"} → ${s.languages.target || "?"}` : null;
  return [...rows, ["validation", dataset(s.valid_dataset_id)], ["languages", languages],
    ["published as", s.register_as ? h("code", {}, s.register_as) : null]];
}

function summaryCard(p, actions) {
  const [n, step] = currentStep(p);
  const running = p.status === "running";
  return h("section", { class: "card", id: "pipeline-summary", "aria-live": "polite" },
    h("div", { class: "summary-row" }, statusBadge(p.status),
      h("span", { id: "pipeline-kind" }, `${KIND_TEXT[p.kind] || p.kind} · ${p.steps.length} steps`),
      running ? h("span", { class: "muted", id: "pipeline-at" }, `at step ${n} of ${p.steps.length}: ${step.name}`) : null,
      h("div", { class: "pipe-actions" }, actions)),
    p.cancel_requested && running ? h("p", { class: "muted" }, "Cancel requested: its running step stops…") : null,
    p.error ? h("div", { class: "error-text", role: "alert", id: "pipeline-error" }, h("strong", {}, "Error: "),
      h("pre", {}, p.error)) : null,
    h("dl", { class: "kv inline-kv", id: "pipeline-fields" },
      [["model", p.model_id ? objectLink("model", p.model_id, { id: "pipeline-model" })
        : h("span", { class: "muted" }, running ? "once the last step succeeds" : "none")],
      ...inputs(p), ["created", fmtTime(p.created_at)], ["finished", p.finished_at ? fmtTime(p.finished_at) : null]]
        .filter(([, v]) => v !== null && v !== undefined)
        .map(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v)])));
}

export function renderPipeline(container, pipelineId) {
  const controller = new AbortController();
  const signal = controller.signal;
  const title = h("h1", { title: pipelineId }, `Pipeline ${shortId(pipelineId)}`);
  const note = h("div", { id: "pipeline-note", "aria-live": "polite" });  // reading it: live, or why not
  const problem = h("div", { id: "pipeline-problem", "aria-live": "assertive" });  // an action the API refused
  const summary = h("div"), steps = h("section", { class: "card", id: "pipeline-steps" });
  clear(container, h("div", { class: "page-head" }, title,
    h("a", { class: "small-link", id: "all-pipelines", href: "#/pipelines" }, "All pipelines")), note, problem, summary, steps);
  let timer = null, epoch = 0;  // epoch: a read sent before an action's answer is not shown after it

  /** A button that asks (when `question`), calls the API, and shows the answer (or the error). */
  function action(id, label, cls, question, call) {
    const button = h("button", { type: "button", class: cls, id }, label);
    button.addEventListener("click", async () => {
      if (question && !confirm(question)) return;
      button.disabled = true;
      problem.replaceChildren();
      try {
        await call();
      } catch (err) {
        if (err.name === "AbortError") return;
        problem.replaceChildren(errorBox(`${label} failed: ${err.message}`));
        button.disabled = false;
        refresh();  // it may have changed meanwhile: show it as it is now
      }
    });
    return button;
  }

  const post = async (what) => {
    const answer = await api(`/v1/pipelines/${pipelineId}/${what}`, { method: "POST", signal });
    epoch += 1;
    clearTimeout(timer);
    liveNote(answer);
    show(answer);
    if (answer.status === "running") timer = setTimeout(load, REFRESH_MS);
  };

  function actionsOf(p) {
    const buttons = [];
    if (p.status === "running" && !p.cancel_requested) {
      buttons.push(action("cancel-pipeline", "Cancel", "danger",
        "Cancel this pipeline? No further step starts, and its running step stops.", () => post("cancel")));
    }
    if (p.status === "failed") {
      buttons.push(action("retry-pipeline", "Retry", "", null, () => post("retry")));
    }
    if (p.status !== "running") {
      buttons.push(action("delete-pipeline", "Delete", "danger",
        "Delete this pipeline? The jobs, datasets and models its steps made stay.", async () => {
          await api(`/v1/pipelines/${pipelineId}`, { method: "DELETE", signal });
          location.hash = "#/pipelines";
        }));
    }
    return buttons;
  }

  function show(p) {
    title.replaceChildren(`Pipeline ${p.name} `, h("span", { class: "muted small-link" }, shortId(p.id)));
    document.title = `${p.name} · Transformer dashboard`;
    container.dataset.status = p.status;
    summary.replaceChildren(summaryCard(p, actionsOf(p)));
    clear(steps, h("h2", {}, "Steps"), stepChain(p), stepNotes(p));
  }

  function refresh() {
    epoch += 1;
    clearTimeout(timer);
    load();
  }

  const liveNote = (p) => note.replaceChildren(p.status === "running"
    ? h("p", { class: "muted" }, "Live: read again every few seconds…") : "");

  async function load() {
    const at = epoch;
    let pipeline;
    try {
      pipeline = await api(`/v1/pipelines/${pipelineId}`, { signal });
      if (at !== epoch) return;  // an action answered meanwhile, and set the next read
      liveNote(pipeline);
      show(pipeline);
    } catch (err) {
      if (err.name === "AbortError" || at !== epoch) return;
      note.replaceChildren(errorBox(err.status === 404 ? `No pipeline ${pipelineId}: it was deleted, or is not yours.`
        : `Could not load pipeline ${pipelineId}: ${err.message}`));
      if (err.status === 404) {  // nothing left to act on
        summary.replaceChildren();
        steps.hidden = true;
        delete container.dataset.status;
        return;
      }
    }
    if (!signal.aborted && (!pipeline || pipeline.status === "running")) {
      timer = setTimeout(load, document.hidden ? HIDDEN_REFRESH_MS : REFRESH_MS);
    }
  }
  load();
  return () => { controller.abort(); clearTimeout(timer); };
}
