// A model explained (#/models/<id>/explain): the questions people ask about how the Transformer is trained, each
// answered with this model's own numbers — its config, its parameter counts (GET /v1/models/{id}/anatomy), its
// weights (GET /v1/models/{id}/geometry) and what its job recorded while training (embeddings, dynamics) — and links
// to the live views. Every sentence below is either computed from those numbers or quoted from the paper.
import { api } from "./api.js";
import { h, clear, fmtNumber, fmtBytes, errorBox, shortId } from "./ui.js";

const PAPER = "Vaswani et al. 2017, “Attention Is All You Need”";
const fmtCount = (n) => n.toLocaleString("en-US");  // exact: the formulas are checked to the weight
const pct = (part, total) => `${((100 * part) / total).toFixed(1)}%`;

function question(id, text, ...answer) {
  return h("section", { class: "card explain", id }, h("h2", {}, text), ...answer);
}

function projections(m, g) {
  const d = g.d_model, V = g.embedding_shape[0];
  const separate = g.layers.every((l) => !l.shares_storage_with_embedding);
  const baseline = fmtNumber(g.random_baseline, 2);
  const rows = g.layers.map((l) => h("tr", { "data-layer": `${l.stack}.${l.layer}.${l.attention}` },
    h("th", { scope: "row" }, `${l.stack} layer ${l.layer} ${l.attention === "self_attn" ? "self" : "cross"}-attention`),
    ["q_proj", "k_proj", "v_proj", "out_proj"].map((p) => h("td", {}, fmtNumber(l.overlap_with_embedding[p], 2))),
    h("td", {}, fmtNumber(l.overlap_q_k, 2))));
  return question("q-projections", "Are W_Q and W_K the same weights as the embedding?",
    h("p", { id: "answer-projections" }, separate
      ? `No. In each of this model's ${g.layers.length} attention sublayers, W_Q, W_K, W_V and W_O are separate trained tensors of shape ${d} × ${d} (${fmtCount(d * d)} weights, plus a bias of ${d}); none shares storage with the embedding matrix E, of shape ${V} × ${d} (${fmtCount(V * d)} weights).`
      : "Some projections of this model share storage with the embedding matrix."),
    h("p", {}, g.embedding_tied_to_output
      ? `E is one matrix used three times: as the encoder's and the decoder's embedding and as the pre-softmax projection (“we share the same weight matrix between the two embedding layers and the pre-softmax linear transformation”, ${PAPER}, Sec. 3.4).`
      : `E is not tied to the pre-softmax projection in this model${g.source_and_target_embeddings_shared ? "" : ", and source and target have separate embeddings"}.`),
    h("p", { id: "overlap-caption" }, `Overlap of the ${g.k} strongest input directions of each matrix with the ${g.k} principal directions of E (root mean square cosine of the principal angles; 1 for the same subspace, √(${g.k}/${d}) = ${baseline} for two random ${g.k}-dimensional subspaces of ${d} dimensions):`),
    h("div", { class: "scroll-x" }, h("table", { class: "explain-table", id: "projection-overlaps" },
      h("thead", {}, h("tr", {}, ["sublayer", "W_Q", "W_K", "W_V", "W_O", "W_Q vs W_K"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows))),
    h("p", { class: "muted" }, "Attention heatmaps of every layer and head are on the ", h("a", { href: `#/models/${m.id}` }, "model page"), "."));
}

function parameters(m, a) {
  const c = m.config, d = c.d_model, f = c.d_ff;
  const attention = 4 * (d * d + d), ffn = 2 * d * f + f + d;
  const kinds = Object.entries(a.by_kind).sort((x, y) => y[1] - x[1]);
  const check = (component, formula) => a.by_component[component] === formula
    ? h("span", { class: "ok" }, ` = ${fmtCount(formula)}, the count of this model's ${component} tensors`)
    : h("span", { class: "error-text" }, ` = ${fmtCount(formula)}, but ${component} holds ${fmtCount(a.by_component[component] ?? 0)}`);
  return question("q-parameters", "How many weights are in attention versus the feed-forward layers?",
    h("p", {}, `This model has ${fmtCount(a.total_parameters)} parameters:`),
    h("table", { class: "explain-table", id: "parameters-by-kind" },
      h("tbody", {}, kinds.map(([kind, n]) => h("tr", { "data-kind": kind }, h("th", { scope: "row" }, kind),
        h("td", {}, fmtCount(n)), h("td", {}, pct(n, a.total_parameters)))))),
    h("p", { id: "formula-attention" }, `Each attention sublayer: W_Q, W_K, W_V, W_O with biases, 4·(d_model² + d_model) = 4·(${d}² + ${d})`,
      check("encoder.layers.0.self_attn", attention), "."),
    h("p", { id: "formula-ffn" }, `Each feed-forward sublayer (FFN(x) = max(0, xW₁ + b₁)W₂ + b₂, ${PAPER}, Eq. 2; this model's activation: ${c.activation || "relu"}): 2·d_model·d_ff + d_ff + d_model = 2·${d}·${f} + ${f} + ${d}`,
      check("encoder.layers.0.ffn", ffn), "."),
    h("p", { id: "sublayers" }, `“Each layer has two sub-layers. The first is a multi-head self-attention mechanism, and the second is a simple, position-wise fully connected feed-forward network.” “In addition to the two sub-layers in each encoder layer, the decoder inserts a third sub-layer, which performs multi-head attention over the output of the encoder stack.” (${PAPER}, Sec. 3.1) ` +
      sublayerCounts(a)));
}

/** How many attention and feed-forward sublayers the anatomy lists, and their share of the parameters. */
function sublayerCounts(a) {
  const matching = (pattern) => Object.entries(a.by_component).filter(([name]) => pattern.test(name));
  const count = (pattern) => {
    const found = matching(pattern);
    return { n: found.length, params: found.reduce((sum, [, n]) => sum + n, 0) };
  };
  const encoder = count(/^encoder\.layers\.\d+\.self_attn$/), self = count(/^decoder\.layers\.\d+\.self_attn$/);
  const cross = count(/^decoder\.layers\.\d+\.encoder_attn$/), ffn = count(/^(en|de)coder\.layers\.\d+\.ffn$/);
  const attention = encoder.params + self.params + cross.params;
  return `This model has ${encoder.n} encoder self-attention, ${self.n} decoder self-attention and ${cross.n} ` +
    `encoder-decoder attention sublayers, ${fmtCount(attention)} parameters (${pct(attention, a.total_parameters)}), ` +
    `and ${ffn.n} feed-forward sublayers, ${fmtCount(ffn.params)} parameters (${pct(ffn.params, a.total_parameters)}).`;
}

function memory(m, a, g) {
  const mem = a.memory;
  const copy = mem.training_total_bytes - mem.weights_bytes - mem.gradients_bytes - mem.adam_bytes - mem.activations_bytes;
  return question("q-memory", "Which parts are trainable and stored, and what is held in memory during a training step?",
    h("p", { id: "trainable-parameters" }, `${fmtCount(g.trainable_parameters)} of this model's ${fmtCount(g.parameters)} parameters have requires_grad set (counted on its weights as the worker loaded them, ${fmtBytes(g.parameter_bytes)}); the model's file is ${fmtBytes(m.size_bytes)} with its tokenizer.`),
    h("p", {}, `Estimated from the config (GET /v1/models/${shortId(m.id)}/anatomy) for a training step of ${fmtCount(a.tokens_per_batch)} tokens per batch in ${a.precision}:`),
    h("table", { class: "explain-table", id: "memory-estimate" }, h("tbody", {},
      [["weights", mem.weights_bytes], ["gradients (one per weight, until the update)", mem.gradients_bytes],
        ["Adam's two moments per weight", mem.adam_bytes], copy ? ["bf16 copies of the weights (autocast)", copy] : null,
        ["activations saved for the backward pass", mem.activations_bytes],
        ["total", mem.training_total_bytes]].filter(Boolean).map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, fmtBytes(v)))))),
    m.job_id ? h("p", { class: "muted" }, "Measured on the job's worker: ", h("a", { href: `#/jobs/${m.job_id}/memory`, id: "memory-link" }, `the memory panel of job ${shortId(m.job_id)}`), ".") : null);
}

function embeddings(m, e, g) {
  const watched = Object.entries(e.neighbors[0] || {});
  return question("q-embeddings", "Why does training make related words close?",
    h("p", {}, `“…we use learned embeddings to convert the input tokens and output tokens to vectors of dimension d_model.” (${PAPER}, Sec. 3.4) Here this model's E ${g.embedding_trainable ? "has" : "does not have"} requires_grad set. At the end of this model's training (step ${e.steps[0]}), the nearest tokens by cosine similarity in E:`),
    h("table", { class: "explain-table", id: "final-neighbours" }, h("tbody", {}, watched.map(([t, near]) =>
      h("tr", {}, h("th", { scope: "row" }, t), h("td", {}, near.map(([n, s]) => `${n} ${fmtNumber(s, 2)}`).join(", ")))))),
    h("p", { class: "muted" }, "How they moved, checkpoint by checkpoint: ", h("a", { href: `#/jobs/${m.job_id}/embeddings`, id: "embeddings-link" }, "the job's embeddings map"), "."));
}

function dynamics(m, w) {
  const step = w.steps[w.steps.length - 1];
  const last = (stat) => w.values[stat][w.values[stat].length - 1];
  const rows = w.groups.map((g, j) => ({ g, j })).filter(({ g }) => g.group.endsWith("self_attn.W_Q") || g.group.endsWith("self_attn.W_K"));
  const ratios = (suffix) => rows.filter(({ g }) => g.group.endsWith(suffix)).map(({ j }) => last("update_ratio")[j]);
  const moved = (name, values) => values.length
    ? `${name}: ‖ΔW‖/‖W‖ ${fmtNumber(values.reduce((sum, v) => sum + v, 0) / values.length, 3)} on average over ${values.length} matrices (from ${fmtNumber(Math.min(...values), 3)} to ${fmtNumber(Math.max(...values), 3)})`
    : `${name}: not recorded`;
  return question("q-dynamics", "How does training the weights of self-attention actually work?",
    h("p", {}, `“Attention(Q, K, V) = softmax(QKᵀ/√d_k)V” (${PAPER}, Sec. 3.2.1, Eq. 1), with “head_i = Attention(QW_i^Q, KW_i^K, VW_i^V)” (Sec. 3.2.2). “We used the Adam optimizer [20] with β1 = 0.9, β2 = 0.98 and ϵ = 10⁻⁹.” (Sec. 5.3)`),
    h("p", { id: "update-ratios" }, `Recorded by this model's job at step ${step}, the last recorded, for self-attention's ${moved("W_Q", ratios("self_attn.W_Q"))}; ${moved("W_K", ratios("self_attn.W_K"))}. Per matrix:`),
    h("table", { class: "explain-table", id: "last-dynamics" },
      h("thead", {}, h("tr", {}, ["matrix", "layer", "‖∇W‖", "‖W‖", "‖ΔW‖/‖W‖"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.map(({ g, j }) => h("tr", {}, h("th", { scope: "row" }, g.group), h("td", {}, g.layer),
        h("td", {}, fmtNumber(last("grad_norm")[j], 3)), h("td", {}, fmtNumber(last("weight_norm")[j], 3)),
        h("td", {}, fmtNumber(last("update_ratio")[j], 3)))))),
    h("p", { class: "muted" }, "Every matrix and head over the whole run: ", h("a", { href: `#/jobs/${m.job_id}/dynamics`, id: "dynamics-link" }, "the job's training dynamics"), "."));
}

export function renderExplain(container, modelId) {
  const controller = new AbortController(), signal = controller.signal;
  clear(container, h("div", { class: "page-head" }, h("h1", {}, `Model ${shortId(modelId)} explained`)), h("p", { class: "muted" }, "Loading…"));
  (async () => {
    const m = await api(`/v1/models/${modelId}`, { signal });
    const optional = (path) => api(path, { signal }).catch((err) => (err.name === "AbortError" ? Promise.reject(err) : null));
    const [a, g, e, w] = await Promise.all([
      api(`/v1/models/${modelId}/anatomy`, { signal }),
      api(`/v1/models/${modelId}/geometry`, { signal }),
      m.job_id ? optional(`/v1/models/${modelId}/embeddings`) : null,
      m.job_id ? optional(`/v1/jobs/${m.job_id}/dynamics?max_records=1`) : null,
    ]);
    clear(container,
      h("div", { class: "page-head" }, h("h1", {}, `Model ${shortId(m.id)} explained`), h("a", { href: `#/models/${m.id}` }, "back to the model")),
      projections(m, g), parameters(m, a), memory(m, a, g),
      e && e.steps.length ? embeddings(m, e, g) : null,
      w && w.steps.length ? dynamics(m, w) : null);
  })().catch((err) => {
    if (err.name !== "AbortError") container.append(errorBox(`Could not explain model ${modelId}: ${err.message}`));
  });
  return () => controller.abort();
}
