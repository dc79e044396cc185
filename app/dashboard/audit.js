// #/audit (keys with scope admin): the organisation's audit trail (GET /v1/audit), newest first, a page at a time,
// filtered by action, kind, object, member and time. Each row: when, what, on which object, who (member and key
// prefix), from where (client address, request id) and the details.

import { api } from "./api.js";
import { clear, errorBox, fmtTime, h } from "./ui.js";

const PAGE = 50;
export const KINDS = ["alias", "dataset", "evaluation", "job", "key", "member", "model", "sweep", "translation",
  "webhook"];

function detailsText(details) {
  const text = Object.entries(details || {}).map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`)
    .join(" · ");
  return text.length > 140 ? `${text.slice(0, 140)}…` : text;
}

function eventRow(e) {
  return h("tr", { "data-event": e.id, "data-action": e.action },
    h("td", { "data-label": "When" }, fmtTime(e.created_at)),
    h("td", { "data-label": "Action" }, h("code", {}, e.action)),
    h("td", { "data-label": "Object", class: "audit-object", title: e.object_id }, e.object_id),
    h("td", { "data-label": "By" }, e.member_name || "–",
      e.key_prefix ? h("span", { class: "muted", title: e.key_name || "" }, ` · ${e.key_prefix}…`) : null),
    h("td", { "data-label": "From", class: "muted" }, e.client || "–",
      e.request_id ? h("div", { class: "audit-request", title: "request id" }, e.request_id) : null),
    h("td", { "data-label": "Details", class: "audit-details", title: JSON.stringify(e.details) },
      detailsText(e.details)));
}

function filterForm(onChange) {
  const kind = h("select", { id: "audit-kind" }, h("option", { value: "" }, "any"),
    KINDS.map((k) => h("option", { value: k }, k)));
  const inputs = {
    action: h("input", { id: "audit-action", placeholder: "e.g. alias.moved", maxlength: 60, spellcheck: "false" }),
    kind,
    object_id: h("input", { id: "audit-object", placeholder: "an id, or name@alias", maxlength: 300 }),
    member: h("input", { id: "audit-member", placeholder: "name or id", maxlength: 100 }),
    since: h("input", { id: "audit-since", type: "datetime-local" }),
    until: h("input", { id: "audit-until", type: "datetime-local" }),
  };
  const labels = { action: "Action", kind: "Kind", object_id: "Object", member: "Member", since: "Since", until: "Until" };
  const form = h("form", { class: "card inline-form", id: "audit-filters", role: "search" },
    Object.entries(inputs).map(([name, el]) => h("label", { class: "field" }, h("span", {}, labels[name]), el)),
    h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const query = new URLSearchParams();
    for (const [name, el] of Object.entries(inputs)) {
      const value = el.value.trim();
      if (!value) continue;
      // datetime-local is the browser's local time, without a zone: sent as UTC
      query.set(name, el.type === "datetime-local" ? new Date(value).toISOString() : value);
    }
    onChange(query);
  });
  return form;
}

export function renderAudit(container) {
  const body = h("tbody");
  const note = h("div", { "aria-live": "polite" });
  const count = h("span", { class: "muted", id: "audit-count" });
  const prev = h("button", { type: "button", class: "secondary small", id: "audit-prev" }, "Newer");
  const next = h("button", { type: "button", class: "secondary small", id: "audit-next" }, "Older");
  const table = h("table", { class: "jobs-table", id: "audit-table" },
    h("caption", { class: "sr-only" }, "Audit events"),
    h("thead", {}, h("tr", {}, ["When", "Action", "Object", "By", "From", "Details"]
      .map((t) => h("th", { scope: "col" }, t)))), body);
  let query = new URLSearchParams(), offset = 0, controller = null;
  async function load() {
    controller?.abort();
    controller = new AbortController();
    try {
      const page = await api(`/v1/audit?limit=${PAGE}&offset=${offset}&${query}`, { signal: controller.signal });
      note.replaceChildren();
      body.replaceChildren(...page.data.map(eventRow));
      if (!page.data.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No event.")));
      const last = Math.min(offset + page.data.length, page.total);
      count.textContent = page.total ? `${offset + 1}–${last} of ${page.total}` : "";
      prev.disabled = offset === 0;
      next.disabled = last >= page.total;
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(`Could not load the audit trail: ${err.message}`));
    }
  }
  prev.addEventListener("click", () => { offset = Math.max(0, offset - PAGE); load(); });
  next.addEventListener("click", () => { offset += PAGE; load(); });
  clear(container, h("div", { class: "page-head" }, h("h1", {}, "Audit")),
    h("p", { class: "muted" }, "Every change made through the API in this organisation: who made it, when, and from ",
      "where. Newest first."),
    filterForm((q) => { query = q; offset = 0; load(); }), note,
    h("div", { class: "card flush" }, table),
    h("div", { class: "pager" }, prev, count, next));
  load();
  return () => controller?.abort();
}
