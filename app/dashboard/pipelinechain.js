// A pipeline's steps drawn as a chain (pipeline.js's page): a box per step, left to right, joined by arrows, each
// box with the step's name, kind and status (coloured as job statuses are), a link to its object (a job, the model
// that translates a dataset, a dataset being filtered) and what it made; over each arrow the model or dataset passed
// on to the next step. Under the chain, the error of a step that failed and the attempts a retry replaced. Plain
// HTML and CSS (pages.css, "Pipelines"): on a phone the chain runs downwards.

import { h, shortId } from "./ui.js";

export const KIND_TEXT = { backtranslation: "back-translation", distillation: "distillation" };
const STEP_KIND_TEXT = { train: "training job", translate: "dataset translation", filter: "filtered dataset" };
const MAKES = { train: "model", translate: "dataset", filter: "dataset" };  // what a step of each kind passes on

/** The step that runs (or failed, or waits), as [index from 1, step]; the last one once all succeeded. */
export function currentStep(pipeline) {
  const steps = pipeline.steps;
  const i = steps.findIndex((s) => s.status !== "succeeded");
  const at = i < 0 ? steps.length - 1 : i;
  return [at + 1, steps[at]];
}

/** A link to an object of the dashboard: a model, a dataset or a job, by its short id. */
export function objectLink(what, id, attrs = {}) {
  const route = { model: "models", dataset: "datasets", job: "jobs" }[what];
  return h("span", { class: "pipe-object" }, `${what} `,
    h("a", { href: `#/${route}/${id}`, title: id, ...attrs }, shortId(id)));
}

/** The model a dataset translation's API url names (/v1/models/<id>/dataset-translations/<tid>). */
const translatingModel = (step) => /\/v1\/models\/([^/]+)\/dataset-translations\//.exec(step.url || "")?.[1];

/** The step's own object: its job, the translation and the model that translates, or the dataset it filters. */
function stepObject(step) {
  if (!step.id) return h("span", { class: "muted" }, "not started");
  if (step.kind === "train") return objectLink("job", step.id, { "data-link": "object" });
  if (step.kind === "filter") return objectLink("dataset", step.id, { "data-link": "object" });
  const model = translatingModel(step);
  return h("span", { class: "pipe-object" }, "translation ", h("code", { title: step.id }, shortId(step.id)),
    model ? [" by ", objectLink("model", model, { "data-link": "object" })] : null);
}

/** What the step made: its model or dataset, linked; null before it succeeded. */
function made(step) {
  const out = step.output || {};
  if (out.model_id) return objectLink("model", out.model_id, { "data-link": "made" });
  if (out.dataset_id) return objectLink("dataset", out.dataset_id, { "data-link": "made" });
  return null;
}

function stepBox(step, number) {
  const output = made(step);
  return h("li", { class: "pipe-step", "data-step": step.name, "data-status": step.status },
    h("div", { class: "pipe-step-head" }, h("span", { class: "pipe-step-number" }, number),
      h("strong", { class: "pipe-step-name" }, step.name)),
    h("div", { class: "pipe-step-kind muted" }, STEP_KIND_TEXT[step.kind] || step.kind),
    h("span", { class: `badge status-${step.status}`, "data-field": "status" }, step.status),
    h("div", { class: "pipe-step-line", "data-field": "object" }, stepObject(step)),
    h("div", { class: "pipe-step-line", "data-field": "made" }, output ? ["made ", output]
      : h("span", { class: "muted" }, `makes a ${MAKES[step.kind]}`)),
    step.earlier.length ? h("div", { class: "pipe-step-line muted small-note" },
      `${step.earlier.length} earlier attempt${step.earlier.length > 1 ? "s" : ""}`) : null);
}

/** The arrow from a step to the next, under the model or dataset it passes on (or the kind it will pass on). */
function arrow(step) {
  const output = made(step);
  return h("li", { class: `pipe-link${output ? " passed" : ""}`, "data-after": step.name },
    h("span", { class: "pipe-link-label" }, output ? [h("span", { class: "sr-only" }, "passes on "), output]
      : h("span", { class: "muted", title: "not made yet" }, MAKES[step.kind])),
    h("span", { class: "pipe-arrow", "aria-hidden": "true" }));
}

/** The chain of steps: box, arrow, box, ... */
export function stepChain(pipeline) {
  const items = pipeline.steps.flatMap((step, i) =>
    (i < pipeline.steps.length - 1 ? [stepBox(step, i + 1), arrow(step)] : [stepBox(step, i + 1)]));
  return h("ol", { class: "pipe-chain", id: "pipeline-chain", "aria-label": "steps, in order" }, items);
}

/** An earlier attempt, replaced by a retry: its job or dataset linked (a translation has no page: its id). */
function earlierLink(step, id) {
  if (step.kind === "train") return objectLink("job", id);
  if (step.kind === "filter") return objectLink("dataset", id);
  return h("span", { class: "pipe-object" }, "translation ", h("code", { title: id }, shortId(id)));
}

/** Under the chain: each step that failed or was cancelled with its error, and each step's earlier attempts. */
export function stepNotes(pipeline) {
  const notes = pipeline.steps.map((step, i) => {
    const error = step.error && (step.status === "failed" || step.status === "cancelled");
    if (!error && !step.earlier.length) return null;
    return h("div", { class: "pipe-note", "data-step": step.name },
      h("h3", {}, `${i + 1}. ${step.name} `, h("span", { class: `badge status-${step.status}` }, step.status)),
      error ? h("div", { class: "error-text", "data-field": "error" }, h("pre", {}, step.error)) : null,
      step.earlier.length ? h("p", { class: "pipe-earlier", "data-field": "earlier" }, "Earlier attempts (replaced by a retry): ",
        step.earlier.map((id, k) => [k ? ", " : "", earlierLink(step, id)])) : null);
  }).filter(Boolean);
  return notes.length ? h("div", { id: "pipeline-step-notes" }, notes) : null;
}
