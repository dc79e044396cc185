// A model in the registry: its name@version, tags, description, languages, licence and, for a translation model, the
// beam requests naming none decode with (PATCH /v1/models/{id}), the
// aliases of its name pointing at it (PUT /v1/models/{name}/aliases/{alias}), and every move of the name's aliases
// (GET /v1/models/{name}/aliases/{alias}/history). Shown on the model page.

import { api } from "./api.js";
import { parseTags } from "./labels.js";
import { clear, errorBox, field, fmtTime, h, shortId } from "./ui.js";

const MOVES_PER_ALIAS = 20;

/** "en-de@3", or the short id of a model without a name. */
export function modelRef(m) {
  return m.name ? `${m.name}@${m.version}` : shortId(m.id);
}

/** The model's tags and aliases as chips (aliases marked as such). */
export function registryChips(m) {
  if (!m.tags?.length && !m.aliases?.length) return null;
  return h("span", { class: "tags" },
    (m.aliases || []).map((a) => h("span", { class: "tag alias", title: `${m.name}@${a} points here` }, `@${a}`)),
    (m.tags || []).map((t) => h("span", { class: "tag" }, t)));
}

function aliasForm(m, onSaved) {
  const alias = h("input", { id: "alias-name", placeholder: "e.g. production", maxlength: 64 });
  const button = h("button", { type: "submit", id: "set-alias", class: "secondary" }, "Point alias here");
  const status = h("div", { "aria-live": "polite", id: "alias-status" });
  const form = h("form", { class: "inline-form", id: "alias-form" },
    field("Alias of this name", alias, `${m.name}@<alias> will reach this version`), button, status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    button.disabled = true;
    status.replaceChildren();
    try {
      const name = encodeURIComponent(m.name), a = encodeURIComponent(alias.value.trim());
      await api(`/v1/models/${name}/aliases/${a}`, { method: "PUT", json: { model_id: m.id } });
      onSaved?.(await api(`/v1/models/${m.id}`));
    } catch (err) {
      status.replaceChildren(errorBox(`Not set: ${err.message}`));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

function versionCell(name, modelId, version, none) {
  if (!modelId) return h("span", { class: "muted" }, none);
  return h("a", { href: `#/models/${modelId}` }, `${name}@${version}`);
}

/** The moves of the name's aliases, newest first: when, which alias, from which version to which, by which key. */
function aliasMoves(m) {
  const box = h("div", { id: "alias-moves" }, h("p", { class: "muted" }, "Loading alias moves…"));
  const name = encodeURIComponent(m.name);
  api(`/v1/models/${name}/aliases`)
    .then((aliases) => Promise.all(aliases.map((a) =>
      api(`/v1/models/${name}/aliases/${encodeURIComponent(a.alias)}/history?limit=${MOVES_PER_ALIAS}`))))
    .then((pages) => {
      const moves = pages.flatMap((page) => page.data)
        .sort((a, b) => new Date(b.created_at) - new Date(a.created_at));
      if (!moves.length) {
        box.replaceChildren();
        return;
      }
      box.replaceChildren(h("h3", {}, "Alias moves"), h("table", { class: "compact", id: "alias-moves-table" },
        h("thead", {}, h("tr", {}, ["When", "Alias", "From", "To", "By key"].map((t) => h("th", {}, t)))),
        h("tbody", {}, moves.map((e) => h("tr", { "data-alias": e.alias },
          h("td", {}, fmtTime(e.created_at)),
          h("td", {}, h("code", {}, `@${e.alias}`)),
          h("td", { class: "from" }, versionCell(e.name, e.from_model_id, e.from_version, "new")),
          h("td", { class: "to" }, versionCell(e.name, e.to_model_id, e.to_version, "removed")),
          h("td", { class: "by" }, h("code", {}, `${e.key_prefix}…`)))))));
    })
    .catch((err) => box.replaceChildren(errorBox(`Alias moves not loaded: ${err.message}`)));
  return box;
}

/** The card: the reference and chips, inputs for the labels, and (once named) the alias form and the alias moves. */
export function registryCard(m, onSaved) {
  const name = h("input", { id: "model-name", value: m.name ?? "", maxlength: 64, placeholder: "e.g. en-de" });
  const tags = h("input", { id: "model-tags", value: (m.tags || []).join(", "), placeholder: "numbers, small" });
  const source = h("input", { id: "model-source-language", value: m.source_language ?? "", placeholder: "en", size: 6 });
  const target = h("input", { id: "model-target-language", value: m.target_language ?? "", placeholder: "de", size: 6 });
  const description = h("textarea", { id: "model-description", rows: 2, maxlength: 10000 }, m.description ?? "");
  const license = h("input", { id: "model-license", value: m.license ?? "", placeholder: "apache-2.0", size: 12,
    pattern: "[A-Za-z0-9][A-Za-z0-9.+\\-]{0,63}", title: "an SPDX licence identifier (apache-2.0, mit, cc-by-4.0) or other" });
  const beam = m.objective === "translation"
    ? h("input", { id: "model-beam-size", type: "number", min: 1, max: 16, value: m.beam_size ?? "", placeholder: "4", size: 4 })
    : null;
  const save = h("button", { type: "submit", id: "save-registry" }, "Save");
  const status = h("div", { "aria-live": "polite", id: "registry-status" });
  const form = h("form", { class: "labels" },
    h("div", { class: "inline" },
      field("Name", name, "a new name makes this its next version"), field("From", source), field("To", target),
      field("Licence", license, "said by the model card of its downloads"),
      beam ? field("Default beam", beam, "for requests that name none; 1: greedy; empty: 4") : null),
    field("Tags", tags, "comma-separated"), field("Description", description),
    h("div", { class: "inline" }, save, status));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    save.disabled = true;
    status.replaceChildren();
    try {
      const saved = await api(`/v1/models/${m.id}`, {
        method: "PATCH",
        json: {
          name: name.value.trim() || null, tags: parseTags(tags.value), description: description.value.trim() || null,
          source_language: source.value.trim() || null, target_language: target.value.trim() || null,
          license: license.value.trim() || null,
          ...(beam ? { beam_size: beam.value ? Number(beam.value) : null } : {}),
        },
      });
      onSaved?.(saved);
    } catch (err) {
      status.replaceChildren(errorBox(`Not saved: ${err.message}`));
    }
    save.disabled = false;
  });
  return clear(h("section", { class: "card", id: "registry" }),
    h("h2", {}, "Registry ", h("code", { id: "model-ref" }, m.name ? modelRef(m) : "not registered")),
    registryChips(m), form, m.name ? aliasForm(m, onSaved) : null, m.name ? aliasMoves(m) : null);
}
