// A model of several language pairs translates into the language its request names: a select of the targets it was
// trained on, for the playground, file translations and evaluations (none for a model of one pair or of one target).

import { h } from "./ui.js";

/** "en → de, en → fr" of a model's or a job's pairs ({source_language, target_language}). */
export const pairsText = (pairs) => pairs.map((p) => `${p.source_language} → ${p.target_language}`).join(", ");

/**
 * { el, value() }: a select of the targets of `pairs` (null when fewer than two: the service needs none), and the
 * one chosen. `fallback`: an empty first option (an evaluation takes its test set's declared pair).
 */
export function targetField(pairs, id, fallback = null) {
  const targets = [...new Set((pairs || []).map((p) => p.target_language))].sort();
  if (targets.length < 2) return { el: null, value: () => null };
  const select = h("select", { id, title: `the language to translate into; trained on ${pairsText(pairs)}` },
    fallback ? h("option", { value: "" }, fallback) : null,
    targets.map((t) => h("option", { value: t }, t)));
  const el = h("div", { class: "field" }, h("label", { for: id }, "Into"), select);
  return { el, value: () => select.value || null };
}

/** "into fr", and "zero-shot" where the model never trained on the pair (a translation's or a task's answer). */
export function targetNote(answer) {
  if (!answer.target_language) return null;
  return h("span", { class: "muted target-note" }, ` · into ${answer.target_language}`,
    answer.zero_shot ? h("span", { class: "badge", title: "a pair the model never trained on" }, "zero-shot") : null);
}
