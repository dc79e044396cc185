// The datasets list (#/datasets): name, kind, status (read again every 2 s while one is processing), rows, size,
// languages, when, and the parent of a filtered one; and the upload form, whose bar shows the bytes sent.

import { api } from "./api.js";
import { clear, errorBox, field, fmtBytes, fmtNumber, fmtTime, h, shortId, statusBadge } from "./ui.js";
import { postWithProgress } from "./upload.js";

const PAGE = 500;  // the API's largest page
const BUSY_MS = 2000, IDLE_MS = 15000;  // how often the list is read while a dataset is processing, and otherwise

/** "en → de", "en" (monolingual), or "–". */
export function languagesText(d) {
  if (d.kind === "monolingual") return d.source_language || "–";
  return d.source_language || d.target_language ? `${d.source_language || "?"} → ${d.target_language || "?"}` : "–";
}

/** Every dataset of the key's owner, newest first (the pages of GET /v1/datasets, up to 20 of them). */
export async function allDatasets(signal) {
  const out = [];
  for (let offset = 0; offset < 20 * PAGE; offset += PAGE) {
    const page = await api(`/v1/datasets?limit=${PAGE}&offset=${offset}`, { signal });
    out.push(...page.data);
    if (out.length >= page.total || !page.data.length) break;
  }
  return out;
}

function datasetRow(d, byId) {
  const parent = d.parent_id ? byId.get(d.parent_id) : null;
  return h("tr", { "data-dataset": d.id, "data-status": d.status, class: "dataset-row" },
    h("td", { "data-label": "Dataset" }, h("div", {}, h("a", { href: `#/datasets/${d.id}` }, d.name),
      h("div", { class: "muted small-link" }, d.status === "processing" ? d.kind : `${d.kind} · ${d.format}`,
        d.compression === "gzip" ? " · gzip" : ""))),
    h("td", { "data-label": "Status" }, h("div", {}, statusBadge(d.status),
      d.status === "failed" ? h("small", { class: "dataset-error", title: d.error }, d.error || "see why") : null)),
    h("td", { "data-label": "Rows", class: "num" }, d.status === "ready" ? fmtNumber(d.rows) : "–"),
    h("td", { "data-label": "Size", class: "num" }, fmtBytes(d.size_bytes)),
    h("td", { "data-label": "Languages" }, languagesText(d)),
    h("td", { "data-label": "Created" }, fmtTime(d.created_at)),
    h("td", { "data-label": "Parent" }, d.parent_id
      ? h("a", { href: `#/datasets/${d.parent_id}`, class: "parent-link" }, parent ? parent.name : shortId(d.parent_id))
      : h("span", { class: "muted" }, "–")));
}

function setProgress(bar, sent, total) {
  const fraction = total ? sent / total : 0;
  const pct = Math.round(fraction * 1000) / 10;
  bar.firstChild.style.width = `${pct}%`;
  bar.setAttribute("aria-valuenow", pct);
  bar.dataset.sent = sent;
  bar.dataset.total = total ?? "";
  bar.lastChild.textContent = total ? `${fmtBytes(sent)} of ${fmtBytes(total)} sent (${pct}%)` : `${fmtBytes(sent)} sent`;
}

/** The upload form; onUploaded(dataset) once the service has stored it (201, processing). */
function uploadCard(onUploaded) {
  const file = h("input", { id: "dataset-file", type: "file", required: true,
                            accept: ".jsonl,.json,.ndjson,.tsv,.tab,.txt,.gz,text/plain,application/gzip" });
  const name = h("input", { id: "dataset-name", type: "text", maxlength: 200, placeholder: "the file's name" });
  const kind = h("select", { id: "dataset-kind" },
    h("option", { value: "parallel" }, "parallel (source and target)"), h("option", { value: "monolingual" }, "monolingual (text)"));
  const format = h("select", { id: "dataset-format" }, ["auto", "jsonl", "tsv"].map((f) => h("option", { value: f }, f)));
  const source = h("input", { id: "dataset-source-language", type: "text", size: 8, maxlength: 35, placeholder: "e.g. en", spellcheck: "false" });
  const target = h("input", { id: "dataset-target-language", type: "text", size: 8, maxlength: 35, placeholder: "e.g. de", spellcheck: "false" });
  const sourceField = field("Source language", source), targetField = field("Target language", target);
  const formatField = field("Format", format);
  const submit = h("button", { type: "submit", id: "dataset-upload" }, "Upload");
  const cancel = h("button", { type: "button", class: "secondary", id: "dataset-upload-cancel", hidden: true }, "Cancel");
  const bar = h("div", { class: "progress upload-progress", id: "dataset-upload-progress", role: "progressbar", hidden: true,
                         "aria-label": "bytes sent", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": 0 },
                h("div", { class: "progress-fill" }), h("span", { class: "progress-text" }));
  const status = h("div", { id: "dataset-upload-status", "aria-live": "polite" });
  kind.addEventListener("change", () => {  // one language, no format for a monolingual corpus
    const mono = kind.value === "monolingual";
    formatField.hidden = targetField.hidden = mono;
    sourceField.querySelector("label").textContent = mono ? "Language" : "Source language";
  });
  let controller = null;
  cancel.addEventListener("click", () => controller?.abort());
  const form = h("form", { class: "card upload-form", id: "dataset-upload-form", "aria-labelledby": "upload-title" },
    h("h2", { id: "upload-title" }, "Upload a dataset"),
    h("p", { class: "muted small-note" }, "JSONL lines {\"source\", \"target\"}, TSV source⇥target, or plain text one sentence a line ",
      "(monolingual); gzip-compressed (.gz) or not. Declared languages let the report find the lines in another one."),
    h("div", { class: "inline upload-fields" }, field("File", file), field("Name", name), field("Kind", kind)),
    h("div", { class: "inline upload-fields upload-settings" }, formatField, sourceField, targetField,
      h("div", { class: "inline upload-actions" }, submit, cancel)), bar, status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = file.files[0];
    if (!f) { status.replaceChildren(errorBox("Choose a file to upload.")); return; }
    const data = new FormData();
    data.append("name", name.value.trim() || f.name);
    data.append("kind", kind.value);
    if (kind.value === "parallel") {
      data.append("format", format.value);
      if (target.value.trim()) data.append("target_language", target.value.trim());
    }
    if (source.value.trim()) data.append("source_language", source.value.trim());
    data.append("file", f);
    controller = new AbortController();
    submit.disabled = true;
    cancel.hidden = false;
    bar.hidden = false;
    setProgress(bar, 0, f.size);
    status.replaceChildren(h("p", { class: "muted" }, `Sending ${f.name} (${fmtBytes(f.size)})…`));
    try {
      const made = await postWithProgress("/v1/datasets", data, {
        signal: controller.signal,
        onProgress: (sent, total) => {
          setProgress(bar, sent, total);
          if (total && sent >= total) status.replaceChildren(h("p", { class: "muted" }, "Sent; the service is storing it…"));
        },
      });
      status.replaceChildren(h("p", { class: "ok" }, "Uploaded ", h("a", { href: `#/datasets/${made.id}` }, made.name),
        ": a worker is parsing and checking it (its row below follows)."));
      form.reset();
      kind.dispatchEvent(new Event("change"));
      onUploaded(made);
    } catch (err) {
      bar.hidden = true;
      status.replaceChildren(err.name === "AbortError" ? h("p", { class: "muted" }, "Upload cancelled.")
        : errorBox(`Upload failed: ${err.message}`));
    } finally {
      submit.disabled = false;
      cancel.hidden = true;
      controller = null;
    }
  });
  return form;
}

export function renderDatasets(container) {
  const body = h("tbody");
  const note = h("div", { "aria-live": "polite" });
  const table = h("table", { class: "datasets-table" },
    h("caption", { class: "sr-only" }, "Datasets"),
    h("thead", {}, h("tr", {}, ["Dataset", "Status", "Rows", "Size", "Languages", "Created", "Parent"]
      .map((t) => h("th", { scope: "col" }, t)))), body);
  let timer = null, stopped = false, controller = null, shown = [];
  function show(list) {
    shown = list;
    const byId = new Map(list.map((d) => [d.id, d]));
    body.replaceChildren(...list.map((d) => datasetRow(d, byId)));
    if (!list.length) body.append(h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No datasets yet: upload one above.")));
  }
  function next(busy) {
    clearTimeout(timer);
    if (!stopped) timer = setTimeout(load, busy ? BUSY_MS : document.hidden ? 3 * IDLE_MS : IDLE_MS);
  }
  // the service's answer is the new row, processing, at once; the next reads follow it
  const uploaded = (made) => {
    if (stopped) return;
    controller?.abort();  // a read begun before the upload would not have it
    show([made, ...shown.filter((d) => d.id !== made.id)]);
    next(true);
  };
  clear(container,
    h("div", { class: "page-head" }, h("h1", {}, "Datasets")),
    uploadCard(uploaded), note, h("div", { class: "card flush" }, table));
  async function load() {
    controller?.abort();
    controller = new AbortController();
    try {
      const list = await allDatasets(controller.signal);
      note.replaceChildren();
      show(list);
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(`Could not load datasets: ${err.message}`));
    }
    next(shown.some((d) => d.status === "processing"));
  }
  load();
  return () => { stopped = true; clearTimeout(timer); controller?.abort(); };
}
