// #/workers: the workers alive now (GET /v1/workers), the queues each consumes, the device it computes on, and
// what an inference worker serves: what `backend: auto` means on it and the models it holds loaded (warm).

import { api } from "./api.js";
import { clear, errorBox, fmtBytes, fmtTime, h } from "./ui.js";

function deviceCell(w) {
  if (!w.device_kind) return h("span", { class: "muted" }, "not reported yet");
  return h("span", {}, h("strong", {}, w.device_kind === "cuda" ? "GPU" : "CPU"), " ", w.device_name || "");
}

function memoryCell(w) {
  if (w.device_memory_total == null) return "–";
  const free = w.device_memory_free == null ? "" : `${fmtBytes(w.device_memory_free)} free of `;
  return `${free}${fmtBytes(w.device_memory_total)}`;
}

const BACKENDS = { ctranslate2: "CTranslate2", pytorch: "PyTorch" };

function servingCell(w) {
  const s = w.serving;
  if (!s) return h("span", { class: "muted" }, "–");
  const auto = s.backend_auto
    ? h("div", { class: "worker-auto" }, "auto: ", h("strong", {}, BACKENDS[s.backend_auto]),
      s.backend_note ? h("span", { class: "muted small-note" }, ` (${s.backend_note})`) : null)
    : h("div", { class: "muted small-note" }, s.backend_note || "");
  const warm = s.warm_models.map((m) => h("li", { "data-model": m.model_id },
    h("code", { title: m.model_id }, m.ref || m.model_id.slice(0, 8)), ` ${BACKENDS[m.backend]}`,
    h("span", { class: "muted" }, m.pinned ? " · pinned" : "", ` · ${Math.round(m.load_ms / 100) / 10} s to load`)));
  const failed = s.warm_failed.map((f) => h("li", { class: "worker-warm-failed" },
    h("code", {}, f.ref), h("span", { class: "muted" }, ` not loaded: ${f.error}`)));
  const models = warm.length || failed.length
    ? h("ul", { class: "children worker-warm" }, ...warm, ...failed)
    : h("div", { class: "muted" }, s.warming ? "loading warm models…" : "no model loaded");
  return h("div", {}, auto, models);
}

function workerRow(w) {
  return h("tr", { "data-worker": w.hostname, "data-device": w.device_kind || "" },
    h("td", { "data-label": "Worker" }, w.hostname, w.draining ? h("span", { class: "muted" }, " · draining") : null),
    h("td", { "data-label": "Queues" }, w.queues.join(", ")),
    h("td", { "data-label": "Device", class: "worker-device" }, deviceCell(w)),
    h("td", { "data-label": "Memory", class: "worker-memory" }, memoryCell(w)),
    h("td", { "data-label": "Serving", class: "worker-serving" }, servingCell(w)),
    h("td", { "data-label": "Last seen" }, fmtTime(w.last_seen_at)));
}

export function renderWorkers(container) {
  const body = h("tbody");
  const note = h("div", { "aria-live": "polite" });
  const table = h("table", { class: "jobs-table", id: "workers-table" },
    h("caption", { class: "sr-only" }, "Workers"),
    h("thead", {}, h("tr", {}, ["Worker", "Queues", "Device", "Memory", "Serving", "Last seen"]
      .map((t) => h("th", { scope: "col" }, t)))), body);
  clear(container, h("div", { class: "page-head" }, h("h1", {}, "Workers")),
    h("p", { class: "muted" }, "Workers whose heartbeat was seen in the last three periods. A job asking for ",
      h("code", {}, "accelerator: \"gpu\""), " waits until a GPU worker is here. An inference worker lists the models it holds loaded: ",
      "those pinned load when it starts (", h("code", {}, "INFERENCE_WARM_MODELS"), ")."),
    note, h("div", { class: "card flush" }, table));
  let timer = null, stopped = false, controller = null;
  async function load() {
    controller = new AbortController();
    try {
      const answer = await api("/v1/workers", { signal: controller.signal });
      note.replaceChildren();
      body.replaceChildren(...answer.workers.map(workerRow));
      if (!answer.workers.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No worker is running.")));
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(`Could not load workers: ${err.message}`));
    }
    if (!stopped) timer = setTimeout(load, document.hidden ? 10000 : 5000);
  }
  load();
  return () => { stopped = true; clearTimeout(timer); controller?.abort(); };
}
