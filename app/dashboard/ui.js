// Small DOM helpers and number formats shared by the views.

/** h("div", {class: "x", onclick: f}, child, "text", [more]) -> HTMLElement. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A labelled form field: <label for=id>text</label><input id=id ...>. */
export function field(label, control, hint) {
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control,
           hint ? h("small", { class: "muted" }, hint) : null);
}

export function errorBox(message) {
  return h("p", { class: "error", role: "alert" }, message);
}

export function fmtNumber(x, digits = 4) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  if (Number.isInteger(x)) return x.toLocaleString("en-US");
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return x.toExponential(2);
  return Number(x.toPrecision(digits)).toString();
}

export function fmtCount(n) {
  if (n === null || n === undefined) return "–";
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k`;
  return String(n);
}

export function fmtBytes(b) {
  if (b === null || b === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return `${b.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  seconds = Math.max(0, Math.round(seconds));
  const h_ = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), sec = seconds % 60;
  if (h_) return `${h_}h ${String(m).padStart(2, "0")}m`;
  if (m) return `${m}m ${String(sec).padStart(2, "0")}s`;
  return `${sec}s`;
}

export function fmtTime(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

export const shortId = (id) => (id ? id.slice(0, 8) : "–");

export function statusBadge(status) {
  return h("span", { class: `badge status-${status}` }, status);
}

export function progressBar(fraction, label) {
  const pct = Math.round(Math.max(0, Math.min(1, fraction || 0)) * 1000) / 10;
  const bar = h("div", { class: "progress", role: "progressbar", "aria-label": label || "progress",
                         "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": pct },
                h("div", { class: "progress-fill" }), h("span", { class: "progress-text" }, `${pct}%`));
  bar.firstChild.style.width = `${pct}%`;
  return bar;
}

export function newId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

// What a translation may ask for (the API's `backend`); answers and records name the one that translated.
export const BACKENDS = [["auto", "auto"], ["ctranslate2", "CTranslate2"], ["pytorch", "PyTorch"]];
export const backendName = (backend) => Object.fromEntries(BACKENDS)[backend] ?? backend;
