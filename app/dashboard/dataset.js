// A dataset's page (#/datasets/<id>): its fields; while it is processing a note that follows it; if it failed, the
// error and its line; if ready, the data report (datareport.js) and the Clean form (cleanform.js). Its lineage: the
// parent, the rules and what each removed, the datasets filtered from it; and the jobs that use it.

import { api } from "./api.js";
import { bars } from "./charts.js";
import { cleanCard } from "./cleanform.js";
import { pct, reportCards } from "./datareport.js";
import { languagesText } from "./datasets.js";
import { clear, errorBox, fmtBytes, fmtDuration, fmtNumber, fmtTime, h, shortId, statusBadge } from "./ui.js";

const BUSY_MS = 2000, IDLE_MS = 15000;  // read again this often while it (or a child) is processing, and otherwise
const JOB_PAGES = 5, JOB_PAGE = 100;  // the newest 500 jobs that use it
const RULE_ORDER = ["empty", "invalid_characters", "length", "ratio_outliers", "duplicates", "copies",
  "placeholder_mismatches", "wrong_language", "misaligned"];

const kv = (pairs) => h("dl", { class: "kv" }, pairs.filter(([, v]) => v !== null && v !== undefined)
  .map(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v)]));

function summaryCard(d) {
  return h("section", { class: "card", id: "dataset-summary", "aria-labelledby": "dataset-summary-title" },
    h("h2", { id: "dataset-summary-title" }, "Dataset"),
    kv([
      ["status", statusBadge(d.status)],
      ["kind", d.kind],
      ["format", d.status === "processing" && d.format === "auto" ? "auto (read from its first line)" : d.format],
      ["compression", d.compression],
      ["rows", d.status === "ready" ? fmtNumber(d.rows) : "–"],
      ["size", `${fmtBytes(d.size_bytes)}${d.compression === "gzip" ? " (compressed)" : ""}`],
      ["languages", languagesText(d)],
      ["sha256", d.sha256 ? h("code", { title: d.sha256 }, `${d.sha256.slice(0, 16)}…`) : "–"],
      ["read from", d.source_uri ? h("code", {}, d.source_uri) : null],
      ["created", fmtTime(d.created_at)],
      ["processed", d.processed_at ? fmtTime(d.processed_at) : null],
      ["id", h("code", {}, d.id)],
    ]));
}

/** While a worker parses (or filters) it: what it does and for how long, updated at every read. */
function processingNote(d) {
  const since = (Date.now() - new Date(d.created_at).getTime()) / 1000;
  return h("p", { class: "waiting", id: "dataset-processing" },
    h("strong", {}, "Processing: "),
    d.parent_id ? "a worker writes the rows its rules keep, then parses them and writes the report. "
      : "a worker parses and checks every line, then writes the report. ",
    h("span", { id: "dataset-processing-since" }, `Started ${fmtDuration(since)} ago`), "; this page follows it.");
}

function failedCard(d) {
  return h("section", { class: "card failed-card", id: "dataset-failed", role: "alert", "aria-labelledby": "dataset-failed-title" },
    h("h2", { id: "dataset-failed-title" }, d.error_line ? "Failed at " : "Failed",
      d.error_line ? h("span", { class: "error-line", id: "dataset-error-line" }, `line ${fmtNumber(d.error_line)}`) : null),
    h("pre", { class: "dataset-error-text", id: "dataset-error" }, d.error || "no reason recorded"),
    h("p", { class: "muted small-note" }, d.parent_id ? "The parent is as it was: change the rules and clean it again."
      : "Nothing of it can be used: fix the file at that line and upload it again."));
}

const ruleText = ([k, v]) => (v === true ? k : `${k} ${v}`);

/** The parent, the rules and what each removed, and the datasets filtered from this one. */
function lineageCard(d, parent, children) {
  const counts = d.filter_counts;
  const parentText = d.parent_id
    ? d.parent_deleted ? h("span", { id: "dataset-parent", class: "muted" }, `${shortId(d.parent_id)} (deleted)`)
      : h("a", { href: `#/datasets/${d.parent_id}`, id: "dataset-parent" }, parent ? parent.name : shortId(d.parent_id))
    : h("span", { class: "muted" }, d.source_uri ? "none: read in place from its URI" : "none: uploaded");
  const removed = counts ? RULE_ORDER.filter((rule) => rule in counts.removed || (d.filter_rules && ruleOn(rule, d.filter_rules)))
    .map((rule) => ({ label: rule, value: counts.removed[rule] ?? 0,
                      text: `${fmtNumber(counts.removed[rule] ?? 0)} (${pct((counts.removed[rule] ?? 0) / (counts.total || 1))})` })) : [];
  return h("section", { class: "card", id: "dataset-lineage", "aria-labelledby": "dataset-lineage-title" },
    h("h2", { id: "dataset-lineage-title" }, "Lineage"),
    kv([["parent", parentText],
        ["rules", d.filter_rules ? h("span", { class: "tags", id: "dataset-rules" },
          Object.entries(d.filter_rules).map((r) => h("span", { class: "tag" }, ruleText(r)))) : null]]),
    counts ? h("div", { id: "dataset-filter-counts" },
      h("p", { class: "big-number" }, "Kept ", h("strong", { id: "filter-kept" }, fmtNumber(counts.kept)), " of ",
        h("span", { id: "filter-total" }, fmtNumber(counts.total)), ` rows (${pct(counts.kept / (counts.total || 1))})`),
      removed.length ? bars(removed, { ariaLabel: "rows removed by each rule" }) : null) : null,
    d.parent_id && !counts ? h("p", { class: "muted" }, "What each rule removed is known once it is made.") : null,
    children.length || d.status === "ready" ? h("h3", {}, "Filtered from it") : null,
    children.length ? h("ul", { class: "children", id: "dataset-children" }, children.map((c) => h("li", { "data-dataset": c.id },
      h("a", { href: `#/datasets/${c.id}` }, c.name), " ", statusBadge(c.status),
      c.filter_counts ? h("span", { class: "muted" }, ` kept ${fmtNumber(c.filter_counts.kept)} of ${fmtNumber(c.filter_counts.total)}`) : null)))
      : d.status === "ready" ? h("p", { class: "muted", id: "dataset-children" },
        d.kind === "parallel" ? "No dataset yet: clean this one below to make one." : "None.") : null);
}

/** Whether the stored rules turn `rule` (a name of RULE_ORDER) on. */
function ruleOn(rule, rules) {
  if (rule === "length") return rules.min_length !== undefined || rules.max_length !== undefined;
  if (rule === "ratio_outliers") return rules.max_ratio !== undefined;
  if (rule === "duplicates") return Boolean(rules.deduplicate);
  return Boolean(rules[`drop_${rule}`]);
}

/** The newest few hundred jobs that train, validate or test on it (GET /v1/jobs?dataset_id=). */
async function jobsCard(id, signal) {
  const found = [];
  let seen = 0, total = 0;
  for (let i = 0; i < JOB_PAGES; i++) {
    const page = await api(`/v1/jobs?dataset_id=${encodeURIComponent(id)}&limit=${JOB_PAGE}&offset=${i * JOB_PAGE}`, { signal });
    total = page.total;
    seen += page.data.length;
    for (const job of page.data) {
      const role = job.dataset_id === id ? "trains on it" : job.valid_dataset_id === id ? "validates on it"
        : job.test_dataset_id === id ? "is tested on it" : null;
      if (role) found.push([job, role]);
    }
    if (seen >= total) break;
  }
  const body = found.length
    ? h("table", { class: "compact" }, h("caption", { class: "sr-only" }, "Jobs that use this dataset"),
      h("thead", {}, h("tr", {}, ["Job", "Uses it", "Status", "Created"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, found.map(([job, role]) => h("tr", { "data-job": job.id },
        h("td", {}, h("a", { href: `#/jobs/${job.id}` }, job.name || shortId(job.id))), h("td", {}, role),
        h("td", {}, statusBadge(job.status)), h("td", {}, fmtTime(job.created_at))))))
    : h("p", { class: "muted" }, "No job uses it yet.");
  return h("section", { class: "card", id: "dataset-jobs", "aria-labelledby": "dataset-jobs-title" },
    h("h2", { id: "dataset-jobs-title" }, "Jobs"), body,
    seen < total ? h("p", { class: "muted small-note" }, `The newest ${fmtNumber(seen)} of the ${fmtNumber(total)} jobs that use it.`) : null);
}

/** Delete, after a second press that names the dataset. */
function deleteControl(d) {
  const status = h("span", { "aria-live": "polite" });
  const ask = h("button", { type: "button", class: "danger", id: "dataset-delete" }, "Delete");
  const confirm = h("button", { type: "button", class: "danger", id: "dataset-delete-confirm", hidden: true }, `Delete “${d.name}”`);
  const keep = h("button", { type: "button", class: "secondary", hidden: true }, "Keep it");
  const toggle = (asking) => { ask.hidden = asking; confirm.hidden = keep.hidden = !asking; };
  ask.addEventListener("click", () => { toggle(true); keep.focus(); });
  keep.addEventListener("click", () => { toggle(false); ask.focus(); });
  confirm.addEventListener("click", async () => {
    confirm.disabled = true;
    try {
      await api(`/v1/datasets/${d.id}`, { method: "DELETE" });
      location.hash = "#/datasets";
    } catch (err) {
      status.replaceChildren(errorBox(`Not deleted: ${err.message}`));
      confirm.disabled = false;
      toggle(false);
    }
  });
  return h("div", { class: "inline" }, ask, confirm, keep, status);
}

export function renderDataset(container, id) {
  const title = h("h1", {}, "Dataset");
  const actions = h("div", { class: "inline" });
  const note = h("div", { "aria-live": "polite" });
  const state = h("div", { id: "dataset-state" });
  const overview = h("div", { class: "grid2 wide dataset-overview" });
  const report = h("div", { id: "dataset-report" });
  const jobs = h("div");
  const announce = h("p", { class: "sr-only", "aria-live": "polite" });  // the status's changes, said once each
  clear(container, h("div", { class: "page-head dataset-head" }, title, actions), announce, note, state, overview, report, jobs);
  let timer = null, stopped = false, controller = new AbortController();
  let shown = null;  // the status the report part was drawn for

  async function drawReport(d) {
    report.replaceChildren();
    if (d.status !== "ready") return;
    report.append(h("p", { class: "muted" }, "Loading the report…"));
    try {
      const data = await api(`/v1/datasets/${id}/report`, { signal: controller.signal });
      const cards = reportCards(data);
      const clean = d.kind === "parallel" ? cleanCard(d, data) : null;
      report.replaceChildren(...[...cards, clean].filter(Boolean));
      if (clean) {
        const go = h("button", { type: "button", class: "secondary", id: "dataset-clean-open" }, "Clean…");
        go.addEventListener("click", () => { clean.scrollIntoView({ block: "start" }); clean.querySelector("input")?.focus(); });
        actions.prepend(go);
      }
    } catch (err) {
      if (err.name !== "AbortError") report.replaceChildren(errorBox(`Could not load the report: ${err.message}`));
    }
  }

  async function load() {
    let busy = false;
    try {
      const [d, filtered] = await Promise.all([api(`/v1/datasets/${id}`, { signal: controller.signal }),
        api(`/v1/datasets?parent_id=${encodeURIComponent(id)}&limit=500`, { signal: controller.signal })]);
      const parent = d.parent_id ? await api(`/v1/datasets/${d.parent_id}`, { signal: controller.signal })
        .catch((err) => { if (err.status === 404) return null; throw err; }) : null;  // null: deleted
      const children = filtered.data;
      title.replaceChildren(d.name, " ", statusBadge(d.status));
      document.title = `${d.name} · Transformer dashboard`;
      note.replaceChildren();
      state.replaceChildren(d.status === "processing" ? processingNote(d) : d.status === "failed" ? failedCard(d) : "");
      overview.replaceChildren(summaryCard(d), lineageCard(d, parent, children));
      if (d.status !== shown) {
        if (shown === null) actions.replaceChildren(deleteControl(d));
        else announce.textContent = d.status === "ready" ? "Ready: the report is below."
          : `Failed${d.error_line ? ` at line ${d.error_line}` : ""}: ${d.error}`;
        shown = d.status;
        await drawReport(d);
        jobsCard(id, controller.signal).then((card) => jobs.replaceChildren(card))  // a job may wait for it to be parsed
          .catch((err) => { if (err.name !== "AbortError") jobs.replaceChildren(errorBox(`Could not list jobs: ${err.message}`)); });
      }
      busy = d.status === "processing" || children.some((c) => c.status === "processing");
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(err.status === 404 ? `No dataset ${id}: it was deleted, or is not yours.`
        : `Could not load the dataset: ${err.message}`));
      if (err.status === 404) return;
    }
    if (!stopped) timer = setTimeout(load, busy ? BUSY_MS : document.hidden ? 3 * IDLE_MS : IDLE_MS);
  }
  load();
  return () => { stopped = true; clearTimeout(timer); controller.abort(); };
}
