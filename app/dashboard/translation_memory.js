// The playground's translation memory: a parallel dataset to look each text up in (its matches shown under the
// translation, an exact one used instead of it when asked), docs/api.md#translation-memory.

import { api } from "./api.js";
import { field, fmtNumber, h, shortId } from "./ui.js";

/** The memory's fields; `request()` is the translate request's `memory` (null: none chosen). */
export function memoryFields() {
  const dataset = h("select", { id: "memory-dataset" }, h("option", { value: "" }, "none"));
  const replace = h("input", { id: "memory-replace", type: "checkbox" });
  api("/v1/datasets?limit=500").then((page) => {
    dataset.append(...page.data.filter((d) => d.kind === "parallel" && d.status === "ready")
      .map((d) => h("option", { value: d.id }, `${d.name} (${d.rows} rows, ${shortId(d.id)})`)));
  }).catch(() => {});  // a key without `read` lists nothing: the memory stays "none"
  return {
    el: h("div", { class: "inline" }, field("Translation memory", dataset),
      h("div", { class: "field check" }, replace, h("label", { for: "memory-replace" }, "use exact matches"))),
    request: () => (dataset.value ? { dataset_id: dataset.value, ...(replace.checked ? { replace_at: 100 } : {}) } : null),
  };
}

/** A translation's memory matches, best first, with their scores; a badge where the text came from the memory. */
export function memoryMatches(tr) {
  if (!tr.memory_matches) return null;
  if (!tr.memory_matches.length) return h("p", { class: "muted memory-none" }, "no memory match ≥ 75");
  return h("table", { class: "compact memory-matches", "aria-label": "memory matches" },
    h("tbody", {}, tr.memory_matches.map((m) => h("tr", {},
      h("td", { class: "memory-score" }, `${fmtNumber(m.score)}%`), h("td", {}, m.source), h("td", {}, m.target)))));
}

export function memoryBadge(tr) {
  return tr.origin === "memory" ? h("span", { class: "badge memory-origin", title: "an exact match of the memory" }, "from memory") : null;
}
