// Trained models: the list, and a model's page in panels, each with its own link (#/models/<id>/<panel>) and built when
// first opened (tabs.js): overview (summary, confidence flag: confidence.js, registry card: registry.js, downloads), playground (translate or fill-mask,
// alignment, file translation: files.js), evaluations (evaluations.js), corrections and adapting to them (corrections.js), attention viewer, embeddings (neighbours, the
// map at the end of training) and anatomy.

import { calibrationCard, lowConfidenceBadge } from "./confidence.js";
import { correctAction, correctionsPanel } from "./corrections.js";
import { embeddingsPanel } from "./embeddings.js";
import { api, download } from "./api.js";
import { evaluationsPanel } from "./evaluations.js";
import { pairsText, targetField, targetNote } from "./targets.js";
import { glossaryField, glossaryTerms } from "./glossaries.js";
import { memoryBadge, memoryFields, memoryMatches } from "./translation_memory.js";
import { fileTranslationPanel } from "./files.js";
import { modelRef, registryCard, registryChips } from "./registry.js";
import { panelTabs } from "./tabs.js";
import { alignmentView, anatomyBars, bars, heatmap } from "./charts.js";
import { BACKENDS, backendName, clear, errorBox, field, fmtBytes, fmtCount, fmtNumber, fmtTime, h, shortId } from "./ui.js";

/** Upload a model archive: a native export of this service, or an OPUS-MT (Marian) folder as a .tar.gz. */
function importCard() {
  const file = h("input", { id: "import-file", type: "file", accept: ".tar.gz,.tgz,application/gzip" });
  const out = h("div", { id: "import-status", "aria-live": "polite" });
  const button = h("button", { type: "button", id: "import-button", class: "secondary" }, "Import");
  button.addEventListener("click", async () => {
    out.replaceChildren();
    if (!file.files.length) { out.append(errorBox("Choose a .tar.gz to import.")); return; }
    const form = new FormData();
    form.append("file", file.files[0]);
    button.disabled = true;
    out.append(h("p", { class: "muted" }, "Uploading and checking…"));
    try {
      const m = await api("/v1/models/import", { method: "POST", form });
      location.hash = `#/models/${m.id}`;
    } catch (err) {
      out.replaceChildren(errorBox(`Not imported: ${err.message}`));
    } finally {
      button.disabled = false;
    }
  });
  return h("details", { class: "card", id: "import" }, h("summary", {}, "Import a model"),
    h("p", { class: "muted" }, "A .tar.gz: a native download of this service, or an OPUS-MT (Marian) folder with source.spm, target.spm, vocab.json and safetensors weights."),
    h("div", { class: "inline" }, field("Archive", file), button), out);
}

export function renderModels(container) {
  const controller = new AbortController();
  clear(container, h("h1", {}, "Models"), h("p", { class: "muted" }, "Loading…"));
  api("/v1/models?limit=200", { signal: controller.signal }).then((page) => {
    const rows = page.data.map((m) => h("tr", {},
      h("td", { "data-label": "Model" }, h("a", { href: `#/models/${m.id}`, class: "model-ref" }, modelRef(m)), registryChips(m)),
      h("td", { "data-label": "Objective" }, m.objective),
      h("td", { "data-label": "Parameters" }, fmtCount(m.parameters)),
      h("td", { "data-label": "Metrics" }, Object.entries(m.metrics).slice(0, 4).map(([k, v]) => `${k} ${fmtNumber(v)}`).join(", ")),
      h("td", { "data-label": "Job" }, !m.job_id ? "imported"
        : m.job_deleted ? `${shortId(m.job_id)} (deleted)` : h("a", { href: `#/jobs/${m.job_id}` }, shortId(m.job_id))),
      h("td", { "data-label": "Created" }, fmtTime(m.created_at))));
    clear(container, h("h1", {}, "Models"), importCard(), page.data.length ? h("div", { class: "card flush" }, h("table", {},
      h("thead", {}, h("tr", {}, ["Model", "Objective", "Parameters", "Metrics", "Job", "Created"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, rows))) : h("p", { class: "muted" }, "No trained models yet."));
  }).catch((err) => { if (err.name !== "AbortError") clear(container, h("h1", {}, "Models"), errorBox(err.message)); });
  return () => controller.abort();
}

/** A form whose submit runs `action` with a busy button and shows any error in `out`. */
function actionForm({ id, label, fields, out, action }) {
  const button = h("button", { type: "submit" }, label);
  const form = h("form", { class: "inline-form", id }, fields, button);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    button.disabled = true;
    out.replaceChildren(h("p", { class: "muted" }, "Working…"));
    try {
      await action();
    } catch (err) {
      out.replaceChildren(errorBox(err.message));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

// Each token of a translation shaded by how sure the model was of it: the lighter, the less likely.
function tokenProbs(tokens) {
  return h("p", { class: "token-probs", "aria-label": "token probabilities" },
    tokens.map((t) => h("span", { class: t.prob < 0.5 ? "token-prob low" : "token-prob", title: `p = ${fmtNumber(t.prob)}`,
      style: `--p: ${t.prob.toFixed(3)}` }, t.token)));
}

function translatePanel(modelId, pairs, beamSize) {
  const target = targetField(pairs, "translate-target");
  const text = h("textarea", { id: "translate-text", rows: 3, placeholder: "one sentence a line" }, "forty two\nthree hundred and twelve");
  const beam = h("input", { id: "beam-size", type: "number", min: 1, max: 16, value: beamSize ?? 4,
    title: beamSize ? "this model's default beam" : "the service's default beam" });
  const nBest = h("input", { id: "n-best", type: "number", min: 1, max: 16, value: Math.min(3, beamSize ?? 4) });
  const align = h("input", { id: "return-alignment", type: "checkbox", checked: true });
  const probs = h("input", { id: "return-token-probs", type: "checkbox", checked: true });
  const backend = h("select", { id: "translate-backend", title: "auto: CTranslate2 where it serves the model, else PyTorch" },
    BACKENDS.map(([value, label]) => h("option", { value }, label)));
  const memory = memoryFields();
  const glossary = glossaryField();
  const out = h("div", { id: "translate-result", "aria-live": "polite" });
  const form = actionForm({ id: "translate-form", label: "Translate", out,
    fields: [field("Text", text), h("div", { class: "inline" }, target.el, field("Beam size", beam), field("n-best", nBest),
             field("Backend", backend),
             h("div", { class: "field check" }, align, h("label", { for: "return-alignment" }, "show alignment")),
             h("div", { class: "field check" }, probs, h("label", { for: "return-token-probs" }, "token probabilities"))),
             h("div", { class: "inline" }, memory.el, glossary.el)],
    action: async () => {
      const texts = text.value.split("\n").map((t) => t.trim()).filter(Boolean);
      const r = await api(`/v1/models/${modelId}/translate`, { method: "POST",
        json: { texts, beam_size: Number(beam.value), n_best: Number(nBest.value), return_alignment: align.checked,
                return_token_probs: probs.checked, backend: backend.value, ...(memory.request() ? { memory: memory.request() } : {}),
                ...(target.value() ? { target_language: target.value() } : {}),
                ...(glossary.value() ? { glossary_id: glossary.value() } : {}) } });
      clear(out, r.translations.map((tr, i) => h("div", { class: "translation" },
        h("p", { class: "muted" }, texts[i] ?? ""),
        h("p", { class: "translation-text" }, tr.text, " ", memoryBadge(tr),
          tr.score != null ? h("span", { class: "muted" }, `score ${fmtNumber(tr.score)}`) : null,
          tr.confidence != null ? h("span", { class: "muted confidence" }, ` · confidence ${fmtNumber(tr.confidence)}`) : null,
          lowConfidenceBadge(tr),
          tr.split ? h("span", { class: "badge" }, `split into ${tr.pieces}`) : null),
        tr.token_probs ? tokenProbs(tr.token_probs) : null,
        memoryMatches(tr),
        glossaryTerms(tr),
        correctAction(modelId, texts[i] ?? "", tr.text),
        tr.alternatives?.length > 1 ? h("ol", { class: "alternatives", "aria-label": "alternatives" },
          tr.alternatives.map((a) => h("li", {}, a.text, " ", h("span", { class: "muted" }, fmtNumber(a.score))))) : null,
        tr.alignment ? h("details", { open: i === 0 }, h("summary", {}, "Alignment (most attended source token)"),
          alignmentView(tr.alignment)) : null)),
        h("p", { class: "muted", id: "translate-backend-used" }, `${fmtNumber(r.elapsed_ms)} ms, by ${backendName(r.backend)}`,
          targetNote(r)));
    } });
  return h("section", { class: "card", id: "playground" }, h("h2", {}, "Translate"), form, out);
}

function fillMaskPanel(modelId) {
  const text = h("input", { id: "fill-text", type: "text", value: "the dogs <mask> in the garden" });
  const topK = h("input", { id: "top-k", type: "number", min: 1, max: 50, value: 5 });
  const out = h("div", { id: "fill-result", "aria-live": "polite" });
  const form = actionForm({ id: "fill-form", label: "Fill the masks", out,
    fields: [field("Text with <mask>", text), field("Top k", topK)],
    action: async () => {
      const r = await api(`/v1/models/${modelId}/fill-mask`, { method: "POST", json: { text: text.value, top_k: Number(topK.value) } });
      clear(out, r.masks.map((m) => h("div", {}, h("h3", {}, `<mask> #${m.position + 1}`),
        bars(m.candidates.map((c) => ({ label: c.token, value: c.score, text: `${(100 * c.score).toFixed(1)}%` })),
             { max: 1, ariaLabel: `candidates for mask ${m.position + 1}` }),
        h("p", { class: "muted" }, m.candidates[0]?.sequence ?? ""))));
    } });
  return h("section", { class: "card", id: "playground" }, h("h2", {}, "Fill in the blanks"), form, out);
}

function attentionPanel(modelId, objective) {
  const text = h("input", { id: "attention-text", type: "text", value: objective === "translation" ? "forty two" : "the dogs <mask> in the garden" });
  const target = h("input", { id: "attention-target", type: "text", placeholder: "default: the model's own output" });
  const out = h("div", { id: "attention-result" });
  const form = actionForm({ id: "attention-form", label: "Show attention", out,
    fields: [field("Source text", text), field("Target (optional)", target)],
    action: async () => {
      const body = { text: text.value };
      if (target.value.trim()) body.target = target.value.trim();
      const r = await api(`/v1/models/${modelId}/attention`, { method: "POST", json: body });
      showAttention(out, r);
    } });
  return h("section", { class: "card", id: "attention" }, h("h2", {}, "Attention"),
    h("p", { class: "muted" }, "Weights of one head: encoder self-attention (source × source), decoder self-attention (target × target, causal) and encoder–decoder attention (target × source)."),
    form, out);
}

function showAttention(out, r) {
  const nLayers = Math.max(r.encoder_self.length, r.decoder_self.length, r.cross.length);
  const nHeads = (r.encoder_self[0] || r.cross[0] || []).length;
  const layer = h("select", { id: "attention-layer" }, Array.from({ length: nLayers }, (_, i) => h("option", { value: i }, `layer ${i + 1}`)));
  const head = h("select", { id: "attention-head" }, h("option", { value: "mean" }, "mean of heads"),
    Array.from({ length: nHeads }, (_, i) => h("option", { value: i, selected: i === 0 }, `head ${i + 1}`)));
  const maps = h("div", { class: "heatmaps" });
  const pick = (stack) => {
    const l = stack[Number(layer.value)];
    if (!l) return null;
    if (head.value !== "mean") return l[Number(head.value)];
    return l[0].map((row, i) => row.map((_, j) => l.reduce((a, hd) => a + hd[i][j], 0) / l.length));
  };
  const draw = () => {
    const which = `layer ${Number(layer.value) + 1}, ${head.value === "mean" ? "mean of heads" : `head ${Number(head.value) + 1}`}`;
    const items = [
      ["Encoder self-attention", r.encoder_self, r.source_tokens, r.source_tokens, "source", "source"],
      ["Decoder self-attention", r.decoder_self, r.target_tokens, r.target_tokens, "target", "target"],
      ["Cross-attention", r.cross, r.target_tokens, r.source_tokens, "target", "source"],
    ];
    maps.replaceChildren(...items.map(([title, stack, rows, cols, rl, cl]) => {
      const m = pick(stack);
      return m ? heatmap({ title: `${title} (${rl} × ${cl}), ${which}`, rows, cols, matrix: m, rowLabel: rl, colLabel: cl })
               : h("p", { class: "muted" }, `${title}: no layer ${Number(layer.value) + 1}.`);
    }));
  };
  layer.addEventListener("change", draw);
  head.addEventListener("change", draw);
  clear(out, h("p", {}, "Source: ", h("code", {}, r.source_tokens.join(" ")), h("br"), "Target: ", h("code", {}, r.target_tokens.join(" "))),
    h("div", { class: "inline" }, field("Layer", layer), field("Head", head)), maps);
  draw();
}

function neighborsPanel(modelId) {
  const token = h("input", { id: "neighbor-token", type: "text", value: "hundred" });
  const k = h("input", { id: "neighbor-k", type: "number", min: 1, max: 100, value: 8 });
  const out = h("div", { id: "neighbors-result", "aria-live": "polite" });
  const form = actionForm({ id: "neighbors-form", label: "Find neighbours", out,
    fields: [field("Token", token), field("k", k)],
    action: async () => {
      const r = await api(`/v1/models/${modelId}/neighbors` +
                          `?token=${encodeURIComponent(token.value)}&k=${Number(k.value)}`);
      clear(out, h("p", { class: "muted" }, `Nearest to “${r.token}” by cosine similarity in the shared embedding matrix:`),
        bars(r.neighbors.map((n) => ({ label: n.token, value: Math.max(0, n.similarity), text: n.similarity.toFixed(3) })),
             { max: 1, ariaLabel: `neighbours of ${r.token}` }));
    } });
  return h("section", { class: "card", id: "neighbors" }, h("h2", {}, "Embedding neighbours"), form, out);
}

async function anatomyPanel(section, modelId, signal) {
  try {
    const a = await api(`/v1/models/${modelId}/anatomy`, { signal });
    const m = a.memory;
    clear(section, h("h2", {}, "Anatomy"),
      h("p", {}, h("strong", {}, a.total_parameters.toLocaleString("en-US")), " parameters. ",
        Object.entries(a.by_kind).map(([k, v]) => `${k} ${fmtCount(v)}`).join(" · ")),
      h("p", { class: "muted" }, `Memory for ${a.tokens_per_batch.toLocaleString("en-US")} tokens per batch: training ${fmtBytes(m.training_total_bytes)}, inference ${fmtBytes(m.inference_bytes)}.`),
      anatomyBars(a.parameters),
      h("details", {}, h("summary", {}, "Every weight tensor"), h("div", { class: "scroll-x" }, h("table", { class: "compact" },
        h("thead", {}, h("tr", {}, ["Name", "Symbol", "Shape", "Count"].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, a.parameters.map((p) => h("tr", {}, h("td", {}, h("code", {}, p.name)), h("td", {}, p.symbol),
          h("td", {}, p.shape.join(" × ")), h("td", { class: "num" }, p.count.toLocaleString("en-US")))))))));
  } catch (err) {
    if (err.name !== "AbortError") clear(section, h("h2", {}, "Anatomy"), errorBox(err.message));
  }
}

const EXPORTS = [
  ["native", "", "this service's checkpoint (imports back)"],
  ["huggingface", "", "MarianMTModel.from_pretrained"],
  ["ctranslate2", "int8", "ctranslate2.Translator, int8"],
];

function downloadPanel(modelId) {
  const out = h("p", { id: "download-status", class: "muted", "aria-live": "polite" });
  const buttons = EXPORTS.map(([format, quantization, hint]) => {
    const button = h("button", { type: "button", "data-format": format, title: hint }, format);
    button.addEventListener("click", async () => {
      button.disabled = true;
      out.replaceChildren(`Preparing the ${format} archive…`);
      const query = `format=${format}` + (quantization ? `&quantization=${quantization}` : "");
      try {
        const name = await download(`/v1/models/${modelId}/export?${query}`,
          { onWait: (s) => out.replaceChildren(`The ${format} archive is being built; asking again in ${s} s…`) });
        out.replaceChildren(`Downloaded ${name}`);
      } catch (err) {
        out.replaceChildren(errorBox(err.message));
      } finally {
        button.disabled = false;
      }
    });
    return button;
  });
  const card = h("pre", { id: "model-card", class: "scroll-x" }, "Loading…");
  const cardBox = h("details", { id: "model-card-box" }, h("summary", {}, "Model card (README.md in every archive)"), card);
  cardBox.addEventListener("toggle", async () => {
    if (!cardBox.open) return;
    try {
      card.textContent = await api(`/v1/models/${modelId}/card`, { headers: { Accept: "text/markdown" } });
    } catch (err) {
      card.replaceChildren(errorBox(err.message));
    }
  });
  return h("section", { class: "card", id: "downloads" }, h("h2", {}, "Download"),
    h("p", { class: "muted" }, "A .tar.gz holding one folder: this service's own format, a Hugging Face MarianMTModel, or CTranslate2 (int8)."),
    h("div", { class: "inline" }, buttons), out, cardBox);
}

/** Where the model came from: its job, a job since deleted, or an import. */
function jobLink(m) {
  if (!m.job_id) return h("span", { class: "muted" }, "imported");
  if (m.job_deleted) return h("span", { class: "muted", id: "model-job" }, `job ${shortId(m.job_id)} (deleted)`);
  return h("a", { href: `#/jobs/${m.job_id}`, id: "model-job" }, "the job it came from");
}

/** Delete, after a confirm that names the aliases that point at it: they are dropped with it (?aliases=drop). */
function deleteButton(m, container) {
  const button = h("button", { type: "button", class: "danger", id: "delete-model" }, "Delete");
  button.addEventListener("click", async () => {
    const aliases = m.aliases.map((a) => `${m.name}@${a}`);
    const question = aliases.length
      ? `Delete model ${modelRef(m)}? ${aliases.join(", ")} point${aliases.length > 1 ? "" : "s"} at it and will be removed.`
      : `Delete model ${modelRef(m)} with its exports, evaluations and translated files?`;
    if (!confirm(question)) return;
    button.disabled = true;
    try {
      await api(`/v1/models/${m.id}${aliases.length ? "?aliases=drop" : ""}`, { method: "DELETE" });
      location.hash = "#/models";
    } catch (err) {
      container.prepend(errorBox(`Not deleted: ${err.message}`));
      button.disabled = false;
    }
  });
  return button;
}

/** "keeping encoder layers 0, 1, 2 of 3 and decoder layer 0 of 3": what a cut model kept of its parent. */
function keptLayers(kept) {
  const stack = (name, layers, of) => `${name} layer${layers.length > 1 ? "s" : ""} ${layers.join(", ")} of ${of}`;
  return `keeping ${stack("encoder", kept.encoder, kept.encoder_of)} and ${stack("decoder", kept.decoder, kept.decoder_of)}`;
}

export const MODEL_PANELS = ["playground", "evaluations", "corrections", "attention", "embeddings", "anatomy"];  // beside the overview

/** A model's page; `panel` (one of MODEL_PANELS, or none: the overview) is the one shown. */
export function renderModel(container, modelId, { panel } = {}) {
  const controller = new AbortController();
  const signal = controller.signal;
  let tabs = null;
  api(`/v1/models/${modelId}`, { signal }).then((m) => {
    const c = m.config;
    const title = h("h1", {}, `Model ${modelRef(m)}`);
    const registry = h("div");
    let beamSize = m.beam_size;  // the model's default beam: the beam fields start from it
    const showRegistry = (saved) => {
      title.textContent = `Model ${modelRef(saved)}`;
      if (saved.beam_size !== beamSize) {  // the panels already shown follow a new default
        beamSize = saved.beam_size;
        for (const id of ["beam-size", "translate-beam", "evaluate-beam"]) {
          const input = container.querySelector(`#${id}`);
          if (input) input.value = beamSize ?? 4;
        }
        const nBest = container.querySelector("#n-best");
        if (nBest && Number(nBest.value) > (beamSize ?? 4)) nBest.value = beamSize ?? 4;
      }
      registry.replaceChildren(registryCard(saved, showRegistry));
    };
    const summary = h("section", { class: "card" }, h("dl", { class: "kv inline-kv" },
      h("dt", {}, "objective"), h("dd", {}, m.objective),
      ...(m.pairs ? [h("dt", {}, "language pairs"), h("dd", { id: "model-languages" }, pairsText(m.pairs))]
        : m.source_language || m.target_language ? [h("dt", {}, "languages"),
          h("dd", { id: "model-languages" }, `${m.source_language ?? "?"} → ${m.target_language ?? "?"}`)] : []),
      h("dt", {}, "parameters"), h("dd", {}, m.parameters.toLocaleString("en-US")),
      h("dt", {}, "shape"), h("dd", {}, `d_model ${c.d_model}, ${c.n_heads} heads, ${c.n_encoder_layers}+${c.n_decoder_layers} layers, d_ff ${c.d_ff}, vocab ${c.vocab_size}`),
      h("dt", {}, "size"), h("dd", {}, fmtBytes(m.size_bytes)),
      ...(m.parent_model_id ? [h("dt", {}, m.cut_from ? "cut from" : "fine-tuned from"),
        h("dd", {}, m.parent_model_deleted
          ? h("span", { id: "parent-model", class: "muted" }, `model ${shortId(m.parent_model_id)} (deleted)`)
          : h("a", { href: `#/models/${m.parent_model_id}`, id: "parent-model" }, `model ${shortId(m.parent_model_id)}`),
          m.cut_from ? h("span", { id: "kept-layers", class: "muted" }, ` ${keptLayers(m.cut_from)}`) : null)] : []),
      h("dt", {}, "created"), h("dd", {}, fmtTime(m.created_at))),
      h("p", { class: "metrics" }, Object.entries(m.metrics).map(([k, v]) => h("span", { class: "metric" }, h("strong", {}, k), " ", fmtNumber(v)))));
    const translation = m.objective === "translation";
    const panels = [
      { name: "overview", title: "Overview", mount: (el) => { showRegistry(m); clear(el, summary, calibrationCard(m), registry, downloadPanel(m.id)); } },
      { name: "playground", title: translation ? "Translate" : "Fill in the blanks",
        mount: (el) => clear(el, translation ? translatePanel(m.id, m.pairs, beamSize) : fillMaskPanel(m.id),
          translation ? fileTranslationPanel(m.id, signal, m.pairs, beamSize) : null) },
      translation ? { name: "evaluations", title: "Evaluations", mount: (el) => clear(el, evaluationsPanel(m.id, signal, m.pairs, beamSize)) } : null,
      translation ? { name: "corrections", title: "Corrections", mount: (el) => clear(el, correctionsPanel(m, signal)) } : null,
      { name: "attention", title: "Attention", mount: (el) => clear(el, attentionPanel(m.id, m.objective)) },
      { name: "embeddings", title: "Embeddings", mount: (el) => clear(el, neighborsPanel(m.id),
        m.job_id && !m.job_deleted ? embeddingsPanel(`/v1/models/${m.id}/embeddings`, { signal, title: "Embeddings at the end of training" }) : null) },
      { name: "anatomy", title: "Anatomy", mount: (el) => {
        const anatomy = h("section", { class: "card", id: "anatomy" }, h("h2", {}, "Anatomy"), h("p", { class: "muted" }, "Loading…"));
        clear(el, anatomy);
        anatomyPanel(anatomy, m.id, signal);
      } },
    ].filter(Boolean);
    tabs = panelTabs({ label: "Model", panels, href: (name) => (name === "overview" ? `#/models/${modelId}` : `#/models/${modelId}/${name}`) });
    clear(container,
      h("div", { class: "page-head" }, title,
        h("div", { class: "inline" },
          jobLink(m),
          h("a", { href: `#/models/${m.id}/explain`, id: "explain-link" }, "explained"),
          h("a", { class: "button", id: "fine-tune", href: `#/new?from=${m.id}` }, "Fine-tune"),
          deleteButton(m, container))),
      tabs.el);
    tabs.show(panel);
  }).catch((err) => {
    if (err.name !== "AbortError") clear(container, h("h1", {}, `Model ${modelId.includes("@") ? modelId : shortId(modelId)}`), errorBox(err.message));
  });
  const stop = () => controller.abort();
  stop.showPanel = (name) => {  // the same model, another panel (a tab, back or forward): the page stays
    panel = name;
    tabs?.show(name);
  };
  return stop;
}
