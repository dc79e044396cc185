// A job's labels (name, tags, note): shown and edited on the job page (PATCH /v1/jobs/{id}), shown in the list.

import { api } from "./api.js";
import { clear, errorBox, field, h } from "./ui.js";

/** "a, b ,c" -> ["a", "b", "c"]: the tags as the API takes them (it checks and deduplicates). */
export function parseTags(text) {
  return text.split(",").map((t) => t.trim()).filter(Boolean);
}

/** The tags as small chips; each links to the job list filtered by it. */
export function tagChips(tags) {
  if (!tags?.length) return null;
  return h("span", { class: "tags" },
    tags.map((t) => h("a", { class: "tag", href: `#/jobs?tag=${encodeURIComponent(t)}`, title: `jobs tagged ${t}` }, t)));
}

/** The card: inputs for the three labels and a Save button; onSaved(job) gets the job as the API returns it. */
export function labelsCard(job, onSaved) {
  const name = h("input", { id: "job-name", value: job.name ?? "", maxlength: 200, placeholder: "e.g. warm-up 400" });
  const tags = h("input", { id: "job-tags", value: (job.tags || []).join(", "), placeholder: "baseline, en-fr" });
  const note = h("textarea", { id: "job-note", rows: 3, maxlength: 10000 }, job.note ?? "");
  const save = h("button", { type: "submit", id: "save-labels" }, "Save labels");
  const status = h("div", { "aria-live": "polite", id: "labels-status" });
  const form = h("form", { class: "labels" },
    field("Name", name), field("Tags", tags, "comma-separated: letters, digits and - _ . : /"), field("Note", note),
    h("div", { class: "inline" }, save, status));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    save.disabled = true;
    status.replaceChildren();
    try {
      const saved = await api(`/v1/jobs/${job.id}`, {
        method: "PATCH",
        json: { name: name.value.trim() || null, tags: parseTags(tags.value), note: note.value.trim() || null },
      });
      tags.value = saved.tags.join(", ");
      status.replaceChildren(h("span", { class: "muted" }, "Saved."));
      onSaved?.(saved);
    } catch (err) {
      status.replaceChildren(errorBox(`Not saved: ${err.message}`));
    } finally {
      save.disabled = false;
    }
  });
  return clear(h("section", { class: "card", id: "labels" }), h("h2", {}, "Labels"), form);
}
