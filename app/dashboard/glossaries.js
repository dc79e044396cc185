// #/glossaries: the organisation's glossaries (GET /v1/glossaries), each with its terms on demand (GET …/{id});
// a form that creates one from pasted or uploaded CSV or TBX (POST /v1/glossaries, `csv` or `tbx`: a text that starts
// with "<" is TBX), and delete (DELETE …/{id}).

import { api } from "./api.js";
import { clear, errorBox, field, fmtTime, h, shortId } from "./ui.js";

const termCount = (n) => `${n} term${n === 1 ? "" : "s"}`;

function createForm(onCreated) {
  const name = h("input", { id: "glossary-name", required: true, maxlength: 200, placeholder: "ui terms" });
  const source = h("input", { id: "glossary-source", required: true, maxlength: 20, value: "en", size: 6 });
  const target = h("input", { id: "glossary-target", required: true, maxlength: 20, placeholder: "fr", size: 6 });
  const sensitive = h("input", { id: "glossary-case", type: "checkbox" });
  const csv = h("textarea", { id: "glossary-csv", rows: 6, required: true, spellcheck: "false",
    placeholder: "source,target\nfile,fichier\nsave as,enregistrer sous" });
  const file = h("input", { id: "glossary-file", type: "file", accept: ".csv,.tbx,.xml,text/csv,text/plain,application/xml" });
  file.addEventListener("change", async () => { if (file.files.length) csv.value = await file.files[0].text(); });
  const status = h("div", { id: "glossary-form-status", "aria-live": "polite" });
  const button = h("button", { type: "submit", id: "glossary-create" }, "Create glossary");
  const form = h("form", { class: "card", id: "glossary-form", "aria-labelledby": "glossary-form-title" },
    h("h2", { id: "glossary-form-title" }, "New glossary"),
    h("div", { class: "inline-form" }, field("Name", name), field("From", source), field("To", target),
      h("div", { class: "field check" }, sensitive, h("label", { for: "glossary-case" }, "case-sensitive"))),
    field("Terms (CSV: source,target a line)", csv, "or a TBX document; or load a .csv or .tbx file below"), file, status, button);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    status.replaceChildren();
    button.disabled = true;
    try {
      const created = await api("/v1/glossaries", { method: "POST", json: { name: name.value.trim(),
        source_language: source.value.trim(), target_language: target.value.trim(), case_sensitive: sensitive.checked,
        ...(csv.value.trimStart().startsWith("<") ? { tbx: csv.value } : { csv: csv.value }) } });
      name.value = ""; csv.value = ""; file.value = "";
      onCreated(created);
    } catch (err) {
      status.append(errorBox(`Not created: ${err.message}`));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

function glossaryRow(g, onDeleted) {
  const terms = h("details", { class: "glossary-terms" }, h("summary", {}, termCount(g.terms)));
  terms.addEventListener("toggle", async () => {
    if (!terms.open || terms.querySelector("table")) return;
    try {
      const full = await api(`/v1/glossaries/${g.id}`);
      terms.append(h("table", { class: "compact" }, h("tbody", {},
        full.entries.map((e) => h("tr", {}, h("td", {}, e.source), h("td", {}, "→"), h("td", {}, e.target))))));
    } catch (err) {
      terms.append(errorBox(err.message));
    }
  });
  const remove = h("button", { type: "button", class: "danger small glossary-delete" }, "Delete");
  remove.addEventListener("click", async () => {
    if (!confirm(`Delete glossary ${g.name}?`)) return;
    remove.disabled = true;
    try {
      await api(`/v1/glossaries/${g.id}`, { method: "DELETE" });
      onDeleted();
    } catch (err) {
      remove.replaceWith(errorBox(err.message));
    }
  });
  return h("tr", { "data-glossary": g.id },
    h("td", { "data-label": "Name" }, g.name, h("small", { class: "muted" }, ` ${shortId(g.id)}`)),
    h("td", { "data-label": "Pair" }, `${g.source_language} → ${g.target_language}`),
    h("td", { "data-label": "Case" }, g.case_sensitive ? "sensitive" : "insensitive"),
    h("td", { "data-label": "Terms" }, terms),
    h("td", { "data-label": "Created" }, fmtTime(g.created_at)),
    h("td", {}, remove));
}

export function renderGlossaries(container) {
  const controller = new AbortController();
  const list = h("div", { id: "glossaries-list" }, h("p", { class: "muted" }, "Loading…"));
  async function refresh() {
    try {
      const page = await api("/v1/glossaries?limit=200", { signal: controller.signal });
      list.replaceChildren(page.data.length ? h("div", { class: "card flush" }, h("table", {},
        h("thead", {}, h("tr", {}, ["Name", "Pair", "Case", "Terms", "Created", ""].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, page.data.map((g) => glossaryRow(g, refresh))))) : h("p", { class: "muted" }, "No glossaries yet."));
    } catch (err) {
      if (err.name !== "AbortError") list.replaceChildren(errorBox(err.message));
    }
  }
  clear(container, h("h1", {}, "Glossaries"),
    h("p", { class: "muted" }, "Terminology for a language pair, each source term with the one target term to use."),
    createForm(refresh), list);
  refresh();
  return () => controller.abort();
}

/** The playground's glossary choice; `value()` is the translate request's glossary_id (null: none). */
export function glossaryField() {
  const select = h("select", { id: "glossary-choice" }, h("option", { value: "" }, "none"));
  api("/v1/glossaries?limit=200").then((page) => {
    select.append(...page.data.map((g) => h("option", { value: g.id }, `${g.name} (${g.source_language} → ${g.target_language}, ${termCount(g.terms)})`)));
  }).catch(() => {});  // a key without `read` lists none
  return { el: field("Glossary", select), value: () => select.value || null };
}

/** The glossary terms of one translation and what was done for each. */
export function glossaryTerms(tr) {
  if (!tr.glossary_terms?.length) return null;
  return h("p", { class: "muted glossary-applied" }, "glossary: ",
    tr.glossary_terms.map((t, i) => h("span", {}, i ? ", " : "", `${t.source} → `, h("strong", {}, t.target), ` (${t.how})`)));
}
