// What the signed-in key may do (GET /v1/me: organisation, member, role, scopes), and the controls it may not use:
// links hidden, buttons and forms disabled with a note naming the scope they need. The API refuses them anyway (403);
// this spares the user the attempt. The table below mirrors the scopes the routes declare (docs/security.md).

import { h } from "./ui.js";

const ME_NAME = "transformer.me";
// An organisation's scopes; `operator` (the service's operators') is none of them, so no key here is told it lacks it.
const SCOPE_WORDS = {
  read: "read", inference: "run models", train: "train", "models:write": "change models", admin: "administer",
};

// [selector, scope it needs]: links are hidden, forms and buttons disabled.
const CONTROLS = [
  ['a[href="#/new"], a[href^="#/new?"]', "train"],
  ["#cancel-job, #delete-job, #cancel-sweep, #dataset-delete, #upload-button", "train"],
  ["#cancel-pipeline, #retry-pipeline, #delete-pipeline", "train"],
  ["#labels form, #evaluate-form, .clean-form, #dataset-upload-form", "train"],
  ["#translate-form, #fill-form, #attention-form, #neighbors-form, #translate-file-button", "inference"],
  ['a[href$="/explain"]', "inference"],
  ["#import, #alias-form, #registry form, #delete-model, #glossary-form, .glossary-delete", "models:write"],
  ['a[href="#/webhooks"], a[href="#/audit"]', "admin"],
];
// Pages that are all about one scope: shown as a note instead of a form that cannot be sent.
const PAGES = [[/^#\/new/, "train"], [/^#\/webhooks/, "admin"], [/^#\/audit/, "admin"]];

export const getMe = () => JSON.parse(sessionStorage.getItem(ME_NAME) || "null");
export const setMe = (me) => sessionStorage.setItem(ME_NAME, JSON.stringify(me));
export const clearMe = () => sessionStorage.removeItem(ME_NAME);

/** Whether the signed-in key may use `scope` (before /v1/me answered: yes, the API decides). */
export function can(scope) {
  const me = getMe();
  return !me || me.scopes.includes(scope);
}

/** The topbar's words: who, and what the key may do. */
export function whoText(me) {
  return `${me.member} @ ${me.organisation} · ${me.role}`;
}

export function scopeChips(me) {
  return h("span", { id: "key-scopes", class: "scope-chips", title: `key ${me.key_prefix}… (${me.key_name})` },
    me.scopes.map((s) => h("span", { class: "scope-chip", "data-scope": s }, SCOPE_WORDS[s] || s)));
}

/** A line under the topbar for a key that may not do everything: what it lacks, and that those controls are off. */
export function limitsNote(me) {
  const lacking = Object.keys(SCOPE_WORDS).filter((s) => !me.scopes.includes(s));
  if (!lacking.length) return null;
  const readOnly = me.scopes.length === 1 && me.scopes[0] === "read";
  return h("p", { id: "access-note", class: "access-note", role: "note" },
    readOnly ? "Read-only key: it may not " : `This key (${me.scopes.join(", ") || "no scope"}) may not `,
    `${lacking.map((s) => SCOPE_WORDS[s]).join(", ")}. `,
    "Actions that need those scopes are hidden or disabled", me.role !== "admin" ? ` (your role: ${me.role}).` : ".");
}

/** The scope a page needs that the key lacks, or null. */
export function pageNeeds(hash) {
  const page = PAGES.find(([pattern]) => pattern.test(hash));
  return page && !can(page[1]) ? page[1] : null;
}

function disable(el, scope) {
  const why = `needs scope ${scope}; this key has ${getMe().scopes.join(", ") || "none"}`;
  el.dataset.scopeOff = scope;
  if (el.tagName === "A") { el.hidden = true; return; }
  const controls = el.matches("button, input, select, textarea") ? [el] : el.querySelectorAll("button, input, select, textarea");
  for (const c of controls) { c.disabled = true; c.title = why; }
  if (el.tagName !== "BUTTON") el.prepend(h("p", { class: "muted scope-note" }, `Not with this key: ${why}.`));
}

/** Turn off, under `root`, every control the key may not use (run again as pages render: it skips done ones). Links
 * that stay across pages (the nav) come back for a key that may use them. */
export function applyScopes(root) {
  for (const el of root.querySelectorAll("a[data-scope-off]")) {
    if (can(el.dataset.scopeOff)) { el.hidden = false; delete el.dataset.scopeOff; }
  }
  if (!getMe()) return;
  for (const [selector, scope] of CONTROLS) {
    if (can(scope)) continue;
    for (const el of root.querySelectorAll(selector)) if (el.dataset.scopeOff === undefined) disable(el, scope);
  }
}

/** Keep `root` in step: every render adds nodes, each batch is checked once. */
export function watchScopes(root) {
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => { queued = false; applyScopes(root); });
  }).observe(root, { childList: true, subtree: true });
}
