// The new-job form as a sweep (its "Sweep…" button): the form's job is what every trial shares, and this editor
// adds the search space (a row a setting: a choice of values, or a float or int range, log or not), the sweep's
// name, budget, trials at once, metric, sampler and pruner. POST /v1/sweeps, then the sweep's page; the service
// checks the space against the job schema and its 422 is shown here as the job form shows its errors.

import { api } from "./api.js";
import { clear, errorBox, field, h, newId } from "./ui.js";

// The settings a sweep may search (fields of the job's model and training sections, app/schemas/jobs.py), each
// with a first guess at its range when picked.
export const SEARCHABLE = {
  "training.lr_scale": { type: "float", low: 0.3, high: 3, log: true },
  "training.warmup_steps": { type: "int", low: 100, high: 4000, log: true },
  "training.label_smoothing": { type: "float", low: 0, high: 0.2 },
  "training.clip_norm": { type: "float", low: 0.5, high: 5, log: true },
  "training.max_tokens_per_batch": { type: "choice", values: "2048, 4096, 8192" },
  "training.grad_accum_steps": { type: "choice", values: "1, 2, 4" },
  "training.max_steps": { type: "int", low: 500, high: 4000, log: true },
  "training.max_minutes": { type: "choice", values: "5, 10, 20" },
  "training.max_length": { type: "choice", values: "64, 128, 256" },
  "training.tokenizer": { type: "choice", values: "byte_bpe, bpe, unigram" },
  "training.mask_ratio": { type: "float", low: 0.1, high: 0.4 },
  "training.noise": { type: "choice", values: "span, token" },
  "training.seed": { type: "choice", values: "1, 2, 3" },
  "model.preset": { type: "choice", values: "tiny, small" },
  "model.vocab_size": { type: "choice", values: "4000, 8000, 16000" },
  "model.d_model": { type: "choice", values: "128, 256, 512" },
  "model.n_heads": { type: "choice", values: "4, 8" },
  "model.n_encoder_layers": { type: "int", low: 1, high: 6 },
  "model.n_decoder_layers": { type: "int", low: 1, high: 6 },
  "model.d_ff": { type: "choice", values: "512, 1024, 2048" },
  "model.dropout": { type: "float", low: 0, high: 0.3 },
  "model.attention_dropout": { type: "float", low: 0, high: 0.2 },
  "model.activation": { type: "choice", values: "relu, gelu, swish" },
  "model.init": { type: "choice", values: "normal, xavier" },
  "model.norm_first": { type: "choice", values: "false, true" },
  "model.share_embeddings": { type: "choice", values: "true, false" },
};
const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;  // a registry name (app/schemas/models.py RegisteredName)

/** "tiny, 64, true" -> ["tiny", 64, true]: a choice's values, numbers and booleans as such. */
export function parseValues(text) {
  return text.split(",").map((v) => v.trim()).filter(Boolean).map((v) => {
    if (v === "true" || v === "false") return v === "true";
    return /^-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(v) ? Number(v) : v;
  });
}

/** A number typed in a range's box; what is not one is sent as typed, for the service to name. */
const numberOf = (text) => (text.trim() !== "" && Number.isFinite(Number(text)) ? Number(text) : text.trim());

/** A sweep name from a job's: lower case, what a registry name refuses turned into dashes. */
export function sweepName(jobName) {
  const name = jobName.toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^[^a-z0-9]+/, "").slice(0, 64);
  return NAME.test(name) ? name : "sweep";
}

let rows = 0;  // ids for the dimension rows' controls

function dimensionRow(onRemove, name = "training.lr_scale") {
  const i = rows++;
  const setting = h("select", { id: `space-name-${i}`, "aria-label": "setting" },
    Object.keys(SEARCHABLE).map((k) => h("option", { value: k, selected: k === name }, k)));
  const type = h("select", { id: `space-type-${i}`, "aria-label": "type" },
    ["choice", "float", "int"].map((t) => h("option", { value: t }, t)));
  const low = h("input", { id: `space-low-${i}`, "aria-label": "low", inputmode: "decimal", size: 7, placeholder: "low" });
  const high = h("input", { id: `space-high-${i}`, "aria-label": "high", inputmode: "decimal", size: 7, placeholder: "high" });
  const log = h("input", { id: `space-log-${i}`, type: "checkbox", "aria-label": "log scale" });
  const values = h("input", { id: `space-values-${i}`, "aria-label": "values", placeholder: "comma-separated" });
  const remove = h("button", { type: "button", class: "secondary remove-dimension", title: "remove this setting" }, "×");
  const range = h("span", { class: "range" }, low, " – ", high, h("label", { class: "check" }, log, " log"));
  const row = h("div", { class: "space-row", "data-row": i }, setting, type, range, values, remove);
  const showType = () => { range.hidden = type.value === "choice"; values.hidden = type.value !== "choice"; };
  const guess = () => {
    const g = SEARCHABLE[setting.value];
    type.value = g.type;
    low.value = g.low ?? "";
    high.value = g.high ?? "";
    log.checked = Boolean(g.log);
    values.value = g.values ?? "";
    showType();
  };
  setting.addEventListener("change", guess);
  type.addEventListener("change", showType);
  remove.addEventListener("click", () => { row.remove(); onRemove(); });
  guess();
  row.dimension = () => [setting.value, type.value === "choice"
    ? { type: "choice", values: parseValues(values.value) }
    : { type: type.value, low: numberOf(low.value), high: numberOf(high.value), log: log.checked }];
  return row;
}

/**
 * The sweep editor under the new-job form: `jobBody()` is the form's job as it would be submitted, `check()` an
 * error message the form finds first (no dataset picked) or null, `jobName()` the form's job name.
 */
export function sweepEditor({ jobBody, check, jobName, pairNames = () => [] }) {
  const name = h("input", { id: "sweep-name", maxlength: 64, pattern: NAME.source, required: true,
                            spellcheck: "false", placeholder: "e.g. enfr" });
  const minutes = h("input", { id: "sweep-budget-minutes", type: "number", inputmode: "decimal", min: 0.1, step: "any",
                               placeholder: "no limit" });
  const trials = h("input", { id: "sweep-budget-trials", type: "number", inputmode: "numeric", min: 1, max: 1000, value: 10 });
  const concurrent = h("input", { id: "sweep-concurrent", type: "number", inputmode: "numeric", min: 1, max: 64, value: 1 });
  const METRICS = [["bleu", "bleu"], ["chrf", "chrF"], ["valid_loss", "valid_loss"], ["valid_ppl", "valid_ppl"]];
  const metric = h("select", { id: "sweep-metric" });
  function fillMetrics() {  // a job of several pairs: each pair's own beside the pairs' mean (bleu/en-fr)
    const keep = metric.value, pairs = pairNames();
    metric.replaceChildren(h("option", { value: "" }, "default: bleu, or valid_loss"),
      ...METRICS.map(([v, t]) => h("option", { value: v }, pairs.length ? `${t} (the pairs' mean)` : t)),
      ...pairs.flatMap((pair) => METRICS.slice(0, 3).map(([v, t]) => h("option", { value: `${v}/${pair}` }, `${t} of ${pair}`))));
    metric.value = [...metric.options].some((o) => o.value === keep) ? keep : "";
  }
  fillMetrics();
  const direction = h("select", { id: "sweep-direction" },
    [["", "default: by the metric"], ["maximize", "maximize"], ["minimize", "minimize"]]
      .map(([v, t]) => h("option", { value: v }, t)));
  const sampler = h("select", { id: "sweep-sampler" },
    [["tpe", "TPE (learns from the trials)"], ["random", "random"], ["grid", "grid (choices only)"]]
      .map(([v, t]) => h("option", { value: v }, t)));
  const pruner = h("select", { id: "sweep-pruner" },
    [["asha", "ASHA (successive halving)"], ["median", "median rule"], ["none", "none"]]
      .map(([v, t]) => h("option", { value: v }, t)));
  const space = h("div", { id: "sweep-space-rows", class: "space-rows" });
  const count = () => { add.disabled = space.childElementCount >= 20; };
  const add = h("button", { type: "button", class: "secondary", id: "add-dimension" }, "Add a setting");
  add.addEventListener("click", () => {
    const taken = new Set([...space.children].map((r) => r.dimension()[0]));
    space.append(dimensionRow(count, Object.keys(SEARCHABLE).find((k) => !taken.has(k))));
    count();
  });
  space.append(dimensionRow(count));
  const status = h("div", { id: "sweep-status", "aria-live": "assertive" });
  const submit = h("button", { type: "submit", id: "submit-sweep" }, "Start sweep");
  const close = h("button", { type: "button", class: "secondary", id: "close-sweep" }, "Back to one job");
  const form = h("form", { class: "card sweep-form", id: "sweep-form", novalidate: true, hidden: true },
    h("h2", {}, "Sweep"),
    h("p", { class: "muted" }, "Each trial is a job with the settings above, those searched here replaced by the ",
      "values the sampler picks. The best trial's model is registered as ", h("code", {}, "name@best"), "."),
    h("div", { class: "grid2" },
      field("Sweep name", name, "a registry name: lower case letters, digits and . _ -"),
      field("Metric", metric, "bleu for translation, valid_loss for denoising"),
      field("Direction", direction, "up for scores, down for losses"),
      field("Budget: trials", trials, "trials started, pruned and failed ones included"),
      field("Budget: worker minutes", minutes, "over all trials; give either or both"),
      field("Trials at once", concurrent), field("Sampler", sampler), field("Pruner", pruner, "stops trials that trail at an evaluation")),
    h("h3", {}, "Search space"), space, add,
    h("div", { class: "actions" }, submit, close, status));

  const optional = (el) => (el.value.trim() === "" ? null : numberOf(el.value));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    status.replaceChildren();
    const problem = check();
    if (problem) { status.append(errorBox(problem)); return; }
    const objective = {};
    if (metric.value) objective.metric = metric.value;
    if (direction.value) objective.direction = direction.value;
    const body = {
      name: name.value.trim(), job: jobBody(), objective, sampler: sampler.value, pruner: pruner.value,
      space: Object.fromEntries([...space.children].map((row) => row.dimension())),
      budget: { minutes: optional(minutes), trials: optional(trials) },
      max_concurrent_trials: optional(concurrent) ?? 1,
    };
    submit.disabled = true;
    try {
      const sweep = await api("/v1/sweeps", { method: "POST", json: body, headers: { "Idempotency-Key": newId() } });
      location.hash = `#/sweeps/${sweep.id}`;
    } catch (err) {
      status.append(errorBox(`The sweep was not started: ${err.message}`));
    } finally {
      submit.disabled = false;
    }
  });
  return {
    el: form,
    open() {
      form.hidden = false;
      fillMetrics();
      if (!name.value) name.value = sweepName(jobName());
      form.scrollIntoView({ block: "start" });
      name.focus();
    },
    onClose(fn) { close.addEventListener("click", () => { form.hidden = true; clear(status); fn(); }); },
  };
}
