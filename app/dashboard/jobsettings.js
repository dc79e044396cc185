// The job page's data and settings panel: the datasets it trains, validates and tests on, what the worker chose from
// the time budget (or will choose), and the model and training settings as stored with the job.

import { clear, fmtNumber, h } from "./ui.js";

/** "name: value" lines of the settings that are set (a null override means "the preset's value"). */
function settingsText(settings) {
  return Object.entries(settings).filter(([, v]) => v !== null).map(([k, v]) => `${k}: ${v}`).join("\n");
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

/** A dataset's id as a link to its page, or `none` (a deleted dataset's page says so). */
function datasetLink(id, none) {
  return id ? h("a", { href: `#/datasets/${id}` }, h("code", {}, id)) : h("span", { class: "muted" }, none);
}

/** A job of several language pairs: each pair with its dataset, and the one that picks the best checkpoint. */
function pairsTable(job) {
  if (!job.pairs) return null;
  const best = job.training.best_pair;
  return h("div", { id: "job-pairs" },
    h("h3", {}, `${job.pairs.length} language pairs, sampled at temperature ${fmtNumber(job.training.pair_temperature)}`),
    h("table", {},
      h("thead", {}, h("tr", {}, ["Pair", "Dataset", "Picks the best checkpoint"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, job.pairs.map((p) => {
        const name = `${p.source_language}-${p.target_language}`;
        return h("tr", { "data-pair": name },
          h("td", { "data-label": "Pair" }, `${p.source_language}→${p.target_language}`),
          h("td", { "data-label": "Dataset" }, datasetLink(p.dataset_id, "deleted"),
            p.dataset_name ? h("span", { class: "muted" }, ` ${p.dataset_name}`) : null),
          h("td", { "data-label": "Picks the best checkpoint" }, best === name ? `yes (${job.training.best_metric})` : "–"));
      }))),
    best ? null : h("p", { class: "muted" }, `The mean of the pairs' ${job.training.best_metric} picks the best checkpoint.`));
}

/** Build the panel in `el`; it is drawn again when the worker's choice arrives (the job page reads the job again). */
export function mountSettings(el, job) {
  const config = h("section", { class: "card", id: "config" });
  let drawn = null;
  function draw(job) {
    const auto = JSON.stringify(job.auto_settings ?? null);
    if (auto === drawn) return;  // a progress event: nothing here changed (and a selection in the text stays)
    drawn = auto;
    clear(config, h("h2", {}, "Data and settings"),
      h("dl", { class: "kv" },
        job.pairs ? null : [h("dt", {}, "dataset"), h("dd", {}, datasetLink(job.dataset_id, "–"),
          job.dataset_name ? h("span", { class: "muted" }, ` ${job.dataset_name}`) : null)],
        h("dt", {}, "validation"), h("dd", {}, datasetLink(job.valid_dataset_id, job.pairs ? "held out of each pair" : "held out")),
        h("dt", {}, "test"), h("dd", {}, datasetLink(job.test_dataset_id, "none")),
        job.init_model_id ? [h("dt", {}, "starts from"),
          h("dd", {}, h("a", { href: `#/models/${job.init_model_id}` }, h("code", {}, job.init_model_id)))] : null),
      pairsTable(job),
      autoSettingsView(job.auto_settings),
      h("div", { class: "grid2" },
        h("div", {}, h("h3", {}, "model"), h("pre", {}, settingsText(job.model))),
        h("div", {}, h("h3", {}, "training"), h("pre", {}, settingsText(job.training)))));
  }
  clear(el, config);
  draw(job);
  return { changed: draw };
}
