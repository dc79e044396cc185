// New-job form: name, tag and annotate the job, pick or upload a dataset, choose objective, preset (auto by default:
// the worker chooses) and training settings (or a model to start from: fine-tuning), the workers that may train it
// (any, GPU, CPU), its precision and the tokens whose embedding neighbours are recorded, an optional test set, and
// see the parameter count and memory estimate (POST /v1/estimate) before submitting. #/new?from=<model id> opens it
// starting from that model. More language pairs make it a job of several (pairpicker.js). "Sweep…" turns the form into
// a sweep of such jobs (sweepform.js).

import { api } from "./api.js";
import { anatomyBars } from "./charts.js";
import { parseTags } from "./labels.js";
import { pairPicker } from "./pairpicker.js";
import { sweepEditor } from "./sweepform.js";
import { clear, errorBox, field, fmtBytes, fmtCount, h, newId } from "./ui.js";

const CHECK_POLL_MS = 1000;  // how often an upload's parsing is looked at
const CHECK_WAIT_MS = 120000;  // how long the form follows it before saying it is still being checked

const KIND = { translation: "parallel", denoising: "monolingual" };

/** "the, cat  dog" -> ["the", "cat", "dog"]: watched tokens, separated by commas or spaces. */
function parseTokens(text) {
  return text.split(/[\s,]+/).filter(Boolean);
}

function num(id, value, attrs = {}) {
  return h("input", { id, name: id, type: "number", inputmode: "numeric", value, ...attrs });
}

export function renderNewJob(container, fromModel) {
  const objective = h("select", { id: "objective", name: "objective" },
    h("option", { value: "translation" }, "translation (parallel corpus)"),
    h("option", { value: "denoising" }, "denoising / fill-mask (plain text)"));
  const preset = h("select", { id: "preset", name: "preset" },
    [["auto", "auto — the worker chooses from its speed, the time budget and the corpus"],
     ["tiny", "tiny — 64 dims, 4 heads, 2+2 layers"], ["small", "small — 256, 4 heads, 3+3"],
     ["base", "base — 512, 8 heads, 6+6 (paper)"], ["big", "big — 1024, 16 heads, 6+6"]]
      .map(([v, t]) => h("option", { value: v, selected: v === "auto" }, t)));
  const dataset = h("select", { id: "dataset", name: "dataset", required: true });
  const validDataset = h("select", { id: "valid-dataset", name: "valid-dataset" });
  const testDataset = h("select", { id: "test-dataset", name: "test-dataset" });
  const testField = field("Test set (optional)", testDataset, "the trained model is scored on it (BLEU, chrF) when the job succeeds");
  const initModel = h("select", { id: "init-model", name: "init-model" });
  const modelCard = h("div", { id: "model-settings" });
  const file = h("input", { id: "upload-file", type: "file", accept: ".jsonl,.json,.tsv,.txt,text/plain" });
  const uploadName = h("input", { id: "upload-name", type: "text", placeholder: "defaults to the file name" });
  const uploadButton = h("button", { type: "button", class: "secondary", id: "upload-button" }, "Upload dataset");
  const uploadStatus = h("div", { id: "upload-status", "aria-live": "polite" });
  const jobName = h("input", { id: "new-job-name", name: "job-name", maxlength: 200, placeholder: "e.g. warm-up 400" });
  const jobTags = h("input", { id: "new-job-tags", name: "job-tags", placeholder: "baseline, en-fr" });
  const jobNote = h("textarea", { id: "new-job-note", name: "job-note", rows: 2, maxlength: 10000 });
  const sourceLanguage = h("input", { id: "new-job-source-language", name: "source-language", size: 8, placeholder: "e.g. en" });
  const targetLanguage = h("input", { id: "new-job-target-language", name: "target-language", size: 8, placeholder: "e.g. de" });
  const probeTokens = h("input", { id: "probe_tokens", name: "probe_tokens", placeholder: "the most frequent words" });
  const languagesField = h("div", { class: "inline" }, field("Source language", sourceLanguage),
                           field("Target language", targetLanguage));
  const picker = pairPicker(() => { languagesField.hidden = picker.pairs(dataset.value) !== null; });

  const t = {
    vocab_size: num("vocab_size", 8000, { min: 300, max: 256000 }),
    max_steps: num("max_steps", 2000, { min: 1 }),
    max_tokens_per_batch: num("max_tokens_per_batch", 4096, { min: 32 }),
    warmup_steps: num("warmup_steps", 400, { min: 0 }),
    eval_every: num("eval_every", 200, { min: 1 }),
    checkpoint_every: num("checkpoint_every", 500, { min: 1 }),
  };
  const maxMinutes = h("input", { id: "max_minutes", name: "max_minutes", type: "number", inputmode: "decimal",
                                  min: 0.1, step: "any", placeholder: "none" });
  // With a time budget, what is left blank here is chosen by the worker from the corpus and its throughput.
  const FROM_BUDGET = ["vocab_size", "max_steps", "max_tokens_per_batch", "warmup_steps"];
  const defaults = Object.fromEntries(FROM_BUDGET.map((k) => [k, t[k].value]));
  maxMinutes.addEventListener("input", () => {
    const budget = maxMinutes.value.trim() !== "";
    for (const k of FROM_BUDGET) {
      if (budget && t[k].value === defaults[k]) t[k].value = "";
      if (!budget && t[k].value === "") t[k].value = defaults[k];
      t[k].placeholder = budget ? "from the budget" : "";
    }
  });
  const noise = h("select", { id: "noise", name: "noise" }, h("option", { value: "span" }, "span (BART infilling)"),
                  h("option", { value: "token" }, "token (one token per <mask>)"));
  const noiseField = field("Noise", noise, "denoising only");
  const accelerator = h("select", { id: "accelerator", name: "accelerator" },
    [["any", "any worker"], ["gpu", "GPU workers only"], ["cpu", "CPU workers only"]]
      .map(([v, t]) => h("option", { value: v }, t)));
  const precision = h("select", { id: "precision", name: "precision" },
    [["", "default"], ["fp32", "fp32"], ["bf16", "bf16 (mixed precision)"]]
      .map(([v, t]) => h("option", { value: v }, t)));
  const tokenizer = h("select", { id: "tokenizer", name: "tokenizer" },
    [["byte_bpe", "byte-level BPE (GPT-2)"], ["bpe", "BPE, SentencePiece-style (▁, byte fallback, NFKC)"],
     ["unigram", "unigram, SentencePiece-style (▁, byte fallback, NFKC)"]].map(([v, t]) => h("option", { value: v }, t)));
  const overrides = Object.fromEntries(["d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff"]
    .map((k) => [k, num(k, "", { min: 1, placeholder: "preset" })]));
  const estimateBox = h("div", { id: "estimate", class: "estimate", "aria-live": "polite" }, h("p", { class: "muted" }, "…"));
  const submitStatus = h("div", { id: "submit-status", "aria-live": "assertive" });
  const submit = h("button", { type: "submit", id: "submit-job" }, "Submit job");
  const sweepButton = h("button", { type: "button", class: "secondary", id: "sweep-button",
                                    title: "search some of these settings: one job a trial" }, "Sweep…");

  const form = h("form", { class: "newjob", novalidate: true },
    h("section", { class: "card" }, h("h2", {}, "Labels"),
      field("Job name (optional)", jobName),
      field("Tags", jobTags, "comma-separated: letters, digits and - _ . : /; the jobs list filters by them"),
      field("Note", jobNote),
      languagesField),
    h("section", { class: "card" }, h("h2", {}, "Data"),
      field("Objective", objective),
      field("Training dataset", dataset),
      picker.el,
      field("Validation dataset (optional)", validDataset, "without one, a fraction of the training data is held out"),
      testField,
      h("details", { class: "upload", open: true },
        h("summary", {}, "Upload a new dataset"),
        h("p", { class: "muted" }, "Parallel: JSONL {\"source\",\"target\"} or TSV source<TAB>target. Plain text: one sentence a line. "
          + "The languages given under Labels are declared for it."),
        field("File", file), field("Name", uploadName), uploadButton, uploadStatus)),
    h("section", { class: "card" }, h("h2", {}, "Model"),
      field("Start from", initModel, "a trained model: its weights, architecture and tokenizer (fine-tuning, at a quarter of the learning rate)"),
      modelCard),
    h("section", { class: "card" }, h("h2", {}, "Training"),
      h("div", { class: "grid2" },
        field("Time budget (minutes)", maxMinutes, "blank settings are then chosen from the budget"),
        field("Max steps", t.max_steps), field("Max tokens per batch", t.max_tokens_per_batch),
        field("Warm-up steps", t.warmup_steps), field("Evaluate every", t.eval_every),
        field("Checkpoint every", t.checkpoint_every), noiseField,
        field("Accelerator", accelerator, "which workers may train it; a GPU-only job waits while no GPU worker is running"),
        field("Precision", precision, "default: bf16 on a GPU worker, fp32 on a CPU one; bf16 keeps fp32 weights"),
        field("Tokens to watch", probeTokens, "comma or space separated, at most 20: their nearest neighbours in the embeddings are recorded at each checkpoint"))),
    h("section", { class: "card" }, h("h2", {}, "Estimate"), estimateBox),
    h("div", { class: "actions" }, submit, sweepButton, submitStatus));
  modelCard.append(
    field("Preset", preset, "auto: the presets that fit the worker are timed on it, and the one that should learn most in the time is trained"),
    field("Vocabulary size", t.vocab_size, "subword vocabulary shared by source and target"),
    field("Tokenizer", tokenizer, "trained on the job's data"),
    h("details", {}, h("summary", {}, "Override the preset"),
      h("div", { class: "grid2" }, Object.entries(overrides).map(([k, el]) => field(k, el)))));
  const sweep = sweepEditor({
    jobBody: () => body(),
    check: () => (dataset.value ? null : "Pick a training dataset or upload one first."),
    jobName: () => jobName.value.trim(),
    pairNames: () => (objective.value === "translation" ? picker.names() : []),
  });
  sweepButton.addEventListener("click", () => { sweepButton.hidden = submit.hidden = true; sweep.open(); });
  sweep.onClose(() => { sweepButton.hidden = submit.hidden = false; });
  clear(container, h("h1", {}, "New training job"), form, sweep.el);

  let models = [];
  function fillModels() {
    const keep = initModel.value || fromModel || "";
    const matching = models.filter((m) => m.objective === objective.value);
    initModel.replaceChildren(h("option", { value: "" }, "nothing: new weights"),
      ...matching.map((m) => h("option", { value: m.id, selected: m.id === keep },
        `model ${m.id.slice(0, 8)} — ${fmtCount(m.parameters)} parameters, ${m.source}`)));
    modelCard.hidden = initModel.value !== "";
  }
  initModel.addEventListener("change", () => { modelCard.hidden = initModel.value !== ""; scheduleEstimate(); });
  api("/v1/models?limit=200").then((page) => { models = page.data; fillModels(); scheduleEstimate(); })
    .catch((err) => submitStatus.append(errorBox(`Could not list models: ${err.message}`)));

  let datasets = [];
  function fillDatasets(selectId) {
    const kind = KIND[objective.value];
    const matching = datasets.filter((d) => d.kind === kind && d.status !== "failed");
    const size = (d) => d.status === "ready" ? `${d.rows.toLocaleString("en-US")} rows` : d.status;
    const option = (d, selected) => h("option", { value: d.id, selected },
                                      `${d.name} — ${size(d)} (${d.id.slice(0, 8)})`);
    const keep = dataset.value, keepValid = validDataset.value;
    dataset.replaceChildren(matching.length ? null : h("option", { value: "" }, `no ${kind} datasets: upload one`),
                            ...matching.map((d) => option(d, d.id === selectId)));
    validDataset.replaceChildren(h("option", { value: "" }, "none"), ...matching.map((d) => option(d, false)));
    const keepTest = testDataset.value;
    testDataset.replaceChildren(h("option", { value: "" }, "none"), ...matching.map((d) => option(d, d.id === keepTest)));
    testField.hidden = objective.value !== "translation";
    if (!selectId && matching.some((d) => d.id === keep)) dataset.value = keep;
    picker.el.hidden = objective.value !== "translation";
    picker.fill(picker.el.hidden ? [] : datasets, dataset.value);
    if (matching.some((d) => d.id === keepValid)) validDataset.value = keepValid;
  }
  async function loadDatasets(selectId) {
    try {
      datasets = (await api("/v1/datasets?limit=500")).data;
      fillDatasets(selectId);
    } catch (err) {
      uploadStatus.replaceChildren(errorBox(`Could not list datasets: ${err.message}`));
    }
  }

  uploadButton.addEventListener("click", async () => {
    uploadStatus.replaceChildren();
    if (!file.files.length) { uploadStatus.append(errorBox("Choose a file to upload.")); return; }
    const f = file.files[0];
    const data = new FormData();
    data.append("file", f, f.name);
    data.append("name", uploadName.value.trim() || f.name);
    data.append("kind", KIND[objective.value]);
    if (sourceLanguage.value.trim()) data.append("source_language", sourceLanguage.value.trim());
    if (targetLanguage.value.trim() && objective.value === "translation") data.append("target_language", targetLanguage.value.trim());
    uploadButton.disabled = true;
    uploadStatus.append(h("p", { class: "muted" }, `Uploading ${f.name}…`));
    try {
      let d = await api("/v1/datasets", { method: "POST", form: data });
      uploadStatus.replaceChildren(h("p", { class: "muted" }, `Uploaded ${d.name}: a worker is checking every line…`));
      await loadDatasets(d.id);  // selectable at once: a job submitted now waits for it
      for (let waited = 0; d.status === "processing" && waited < CHECK_WAIT_MS; waited += CHECK_POLL_MS) {
        await new Promise((resolve) => setTimeout(resolve, CHECK_POLL_MS));
        d = await api(`/v1/datasets/${d.id}`);
      }
      const report = h("a", { href: `#/datasets/${d.id}` }, "its report");
      if (d.status === "failed") {
        uploadStatus.replaceChildren(errorBox(`Upload failed: file: ${d.error}`));
      } else if (d.status === "ready") {
        uploadStatus.replaceChildren(h("p", { class: "ok" },
          `Uploaded ${d.name}: ${d.rows.toLocaleString("en-US")} rows (${d.format}); see `, report, "."));
      } else {
        uploadStatus.replaceChildren(h("p", { class: "ok" }, `Uploaded ${d.name}: still being checked (a job `
          + "submitted now waits for it); see ", report, "."));
      }
      await loadDatasets(d.status === "failed" ? undefined : d.id);
    } catch (err) {
      uploadStatus.replaceChildren(errorBox(`Upload failed: ${err.message}`));
    } finally {
      uploadButton.disabled = false;
    }
  });

  const intOf = (el) => (el.value.trim() === "" ? undefined : Number(el.value));
  function modelSpec() {
    const spec = { preset: preset.value, vocab_size: intOf(t.vocab_size) };
    for (const [k, el] of Object.entries(overrides)) if (intOf(el) !== undefined) spec[k] = intOf(el);
    return spec;
  }
  function body() {
    const training = {};
    for (const k of ["max_steps", "max_tokens_per_batch", "warmup_steps", "eval_every", "checkpoint_every"]) {
      if (intOf(t[k]) !== undefined) training[k] = intOf(t[k]);
    }
    if (maxMinutes.value.trim() !== "") training.max_minutes = Number(maxMinutes.value);
    if (objective.value === "denoising") training.noise = noise.value;
    training.tokenizer = tokenizer.value;
    training.accelerator = accelerator.value;
    if (precision.value) training.precision = precision.value;
    const watched = parseTokens(probeTokens.value);
    if (watched.length) training.probe_tokens = watched;
    const b = { objective: objective.value, dataset_id: dataset.value || null, model: modelSpec(), training };
    if (jobName.value.trim()) b.name = jobName.value.trim();
    if (parseTags(jobTags.value).length) b.tags = parseTags(jobTags.value);
    if (jobNote.value.trim()) b.note = jobNote.value.trim();
    if (sourceLanguage.value.trim()) b.source_language = sourceLanguage.value.trim();
    if (targetLanguage.value.trim()) b.target_language = targetLanguage.value.trim();
    const pairs = objective.value === "translation" ? picker.pairs(dataset.value) : null;
    if (pairs) {  // one model for several pairs: each pair's languages are its dataset's
      b.pairs = pairs;
      delete b.dataset_id; delete b.source_language; delete b.target_language;
      if (picker.temperature() !== undefined) training.pair_temperature = picker.temperature();
    }
    if (validDataset.value) b.valid_dataset_id = validDataset.value;
    if (testDataset.value && objective.value === "translation") b.test_dataset_id = testDataset.value;
    if (initModel.value) {  // the architecture and tokenizer are the model's
      b.init_model_id = initModel.value;
      b.model = {};
      delete training.tokenizer;
    }
    return b;
  }

  let estimateTimer = null, estimateSeq = 0;
  async function estimate() {
    const seq = ++estimateSeq;
    const start = models.find((m) => m.id === initModel.value);
    if (start) {
      const c = start.config;
      clear(estimateBox, h("p", { class: "big-number" }, h("span", { id: "estimate-params" }, fmtCount(start.parameters)), " parameters"),
        h("p", { class: "muted" }, `model ${start.id.slice(0, 8)}'s architecture: d_model ${c.d_model}, ${c.n_heads} heads, ${c.n_encoder_layers}+${c.n_decoder_layers} layers, vocabulary ${c.vocab_size}`));
      return;
    }
    try {
      const e = await api("/v1/estimate", { method: "POST",
        json: { model: modelSpec(), tokens_per_batch: intOf(t.max_tokens_per_batch) ?? 4096,
          accelerator: accelerator.value, precision: precision.value || null } });
      if (seq !== estimateSeq) return;
      const m = e.memory;
      const auto = preset.value === "auto"
        ? h("p", { class: "muted", id: "estimate-auto" }, `Preset auto: the worker chooses when the job starts; shown here is ${e.preset}, the smallest it may choose.`)
        : null;
      clear(estimateBox, auto,
        h("p", { class: "big-number" }, h("span", { id: "estimate-params" }, fmtCount(e.total_parameters)), " parameters ",
          h("span", { class: "muted" }, `(${e.total_parameters.toLocaleString("en-US")})`)),
        h("dl", { class: "kv" },
          h("dt", {}, "d_model / heads / d_k"), h("dd", {}, `${e.config.d_model} / ${e.config.n_heads} / ${e.config.d_model / e.config.n_heads}`),
          h("dt", {}, "layers"), h("dd", {}, `${e.config.n_encoder_layers} encoder + ${e.config.n_decoder_layers} decoder, d_ff ${e.config.d_ff}`),
          h("dt", {}, `training memory (${e.precision})`), h("dd", {}, `${fmtBytes(m.training_total_bytes)} (weights ${fmtBytes(m.weights_bytes)}, gradients ${fmtBytes(m.gradients_bytes)}, Adam ${fmtBytes(m.adam_bytes)}, activations ${fmtBytes(m.activations_bytes)})`),
          h("dt", {}, "inference memory"), h("dd", {}, fmtBytes(m.inference_bytes))),
        e.fits_worker_memory ? null : errorBox(`Over the worker memory limit of ${fmtBytes(e.worker_memory_limit_bytes)}: the job would be refused. Lower max tokens per batch or the model size.`),
        h("details", {}, h("summary", {}, "Parameters per component"), anatomyBars(e.parameters)));
    } catch (err) {
      if (seq !== estimateSeq) return;
      clear(estimateBox, errorBox(`Invalid configuration: ${err.message}`));
    }
  }
  const scheduleEstimate = () => { clearTimeout(estimateTimer); estimateTimer = setTimeout(estimate, 300); };

  dataset.addEventListener("change", () => picker.fill(picker.el.hidden ? [] : datasets, dataset.value));
  objective.addEventListener("change", () => {
    noiseField.hidden = objective.value !== "denoising";
    fillDatasets();
    fillModels();
  });
  const noEstimate = new Set([file, uploadName, jobName, jobTags, jobNote, sourceLanguage, targetLanguage, probeTokens]);  // the model is unchanged
  form.addEventListener("input", (e) => { if (!noEstimate.has(e.target)) scheduleEstimate(); });
  form.addEventListener("change", scheduleEstimate);
  noiseField.hidden = true;

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    submitStatus.replaceChildren();
    if (!dataset.value) { submitStatus.append(errorBox("Pick a training dataset or upload one first.")); return; }
    submit.disabled = true;
    try {
      const job = await api("/v1/jobs", { method: "POST", json: body(), headers: { "Idempotency-Key": newId() } });
      location.hash = `#/jobs/${job.id}`;
    } catch (err) {
      submitStatus.append(errorBox(`The job was not submitted: ${err.message}`));
    } finally {
      submit.disabled = false;
    }
  });

  loadDatasets();
  estimate();
  return () => clearTimeout(estimateTimer);
}
