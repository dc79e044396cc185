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
    h("p", {}, `How much each projection reads the directions the embeddings mostly lie in: the overlap (root mean square cosine of the principal angles) between the ${g.k} strongest input directions of each matrix and the ${g.k} principal directions of E. 1 would be the same directions; two random ${g.k}-dimensional subspaces of ${d} dimensions give about ${baseline}.`),
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
    h("p", {}, `An encoder layer holds one attention sublayer and a decoder layer two (self- and cross-attention), each beside one FFN: here ${c.n_encoder_layers} encoder and ${c.n_decoder_layers} decoder layers.`));
}

function memory(m, a) {
  const mem = a.memory;
  return question("q-memory", "Which parts are trainable and stored, and what is held in memory during a training step?",
    h("p", {}, `All ${fmtCount(a.total_parameters)} parameters are trained and stored in the model file (${fmtBytes(a.total_parameters * 4)} as 32-bit floats; the model's file is ${fmtBytes(m.size_bytes)} with its tokenizer).`),
    h("p", {}, `During a training step of ${fmtCount(a.tokens_per_batch)} tokens, memory holds (estimated from the config):`),
    h("table", { class: "explain-table", id: "memory-estimate" }, h("tbody", {},
      [["weights", mem.weights_bytes], ["gradients (one per weight, until the update)", mem.gradients_bytes],
        ["Adam's two moments per weight", mem.adam_bytes], ["activations saved for the backward pass", mem.activations_bytes],
        ["total", mem.training_total_bytes]].map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, fmtBytes(v)))))),
    m.job_id ? h("p", { class: "muted" }, "The job's page shows the memory measured on its worker: ", h("a", { href: `#/jobs/${m.job_id}` }, `job ${shortId(m.job_id)}`), ".") : null);
}

function embeddings(m, e) {
  const watched = Object.entries(e.neighbors[0] || {});
  return question("q-embeddings", "Why does training make related words close?",
    h("p", {}, `E is trained with the rest of the model (“we use learned embeddings to convert the input tokens and output tokens to vectors of dimension d_model”, ${PAPER}, Sec. 3.4). At the end of this model's training (step ${e.steps[0]}), the nearest tokens by cosine similarity in E:`),
    h("table", { class: "explain-table", id: "final-neighbours" }, h("tbody", {}, watched.map(([t, near]) =>
      h("tr", {}, h("th", { scope: "row" }, t), h("td", {}, near.map(([n, s]) => `${n} ${fmtNumber(s, 2)}`).join(", ")))))),
    h("p", { class: "muted" }, "How they moved, checkpoint by checkpoint: ", h("a", { href: `#/jobs/${m.job_id}` }, "the job's embeddings map"), "."));
}

function dynamics(m, w) {
  const step = w.steps[w.steps.length - 1];
  const last = (stat) => w.values[stat][w.values[stat].length - 1];
  const rows = w.groups.map((g, j) => ({ g, j })).filter(({ g }) => g.group.endsWith("self_attn.W_Q") || g.group.endsWith("self_attn.W_K"));
  return question("q-dynamics", "How does training the weights of self-attention actually work?",
    h("p", {}, `The loss's gradient flows back through softmax(QKᵀ/√d_k)V (${PAPER}, Eq. 1) into W_Q and W_K, and Adam moves each by a step scaled per weight (Sec. 5.3). At step ${step}, the last recorded:`),
    h("table", { class: "explain-table", id: "last-dynamics" },
      h("thead", {}, h("tr", {}, ["matrix", "layer", "‖∇W‖", "‖W‖", "‖ΔW‖/‖W‖"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.map(({ g, j }) => h("tr", {}, h("th", { scope: "row" }, g.group), h("td", {}, g.layer),
        h("td", {}, fmtNumber(last("grad_norm")[j], 3)), h("td", {}, fmtNumber(last("weight_norm")[j], 3)),
        h("td", {}, fmtNumber(last("update_ratio")[j], 3)))))),
    h("p", { class: "muted" }, "Every matrix and head over the whole run: ", h("a", { href: `#/jobs/${m.job_id}` }, "the job's training dynamics"), "."));
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
      projections(m, g), parameters(m, a), memory(m, a),
      e && e.steps.length ? embeddings(m, e) : null,
      w && w.steps.length ? dynamics(m, w) : null);
  })().catch((err) => {
    if (err.name !== "AbortError") container.append(errorBox(`Could not explain model ${modelId}: ${err.message}`));
  });
  return () => controller.abort();
}
