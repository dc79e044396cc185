// The public API, as the dashboard calls it: every request carries the key from the sign-in screen.

const KEY_NAME = "transformer.apiKey";

export const getKey = () => sessionStorage.getItem(KEY_NAME);
export const setKey = (key) => sessionStorage.setItem(KEY_NAME, key);
export const clearKey = () => sessionStorage.removeItem(KEY_NAME);

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** A readable sentence from an error body: {"detail": "..."} or FastAPI's 422 list [{"loc", "msg"}]. */
export function describeError(body, status) {
  const detail = body && typeof body === "object" ? body.detail : undefined;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((d) => {
      const loc = (d.loc || []).filter((p) => p !== "body").join(".");
      return loc ? `${loc}: ${d.msg}` : d.msg;
    }).join("; ");
  }
  if (typeof body === "string" && body.trim()) return `${status}: ${body.trim().slice(0, 300)}`;
  return `the service answered ${status}`;
}

/** fetch() a /v1 route; JSON in, JSON out; throws ApiError with a readable message. */
export async function api(path, { method = "GET", json, form, key, signal, headers = {} } = {}) {
  const h = { Authorization: `Bearer ${key ?? getKey() ?? ""}`, Accept: "application/json", ...headers };
  let body;
  if (json !== undefined) {
    h["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  } else if (form) {
    body = form;  // multipart: the browser sets the boundary
  }
  let response;
  try {
    response = await fetch(path, { method, headers: h, body, signal, cache: "no-store" });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, `cannot reach the service (${err.message})`);
  }
  const text = await response.text();
  let data = text;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON: keep the text */ }
  if (!response.ok) {
    const error = new ApiError(response.status, describeError(data, response.status));
    if (response.status === 401 && key === undefined) window.dispatchEvent(new CustomEvent("api-unauthorized"));
    throw error;
  }
  return data;
}

/** Download a file route (e.g. a model export) with the key, into the browser's downloads. While the service
 * answers 202 (being built) it waits Retry-After seconds and asks again; onWait(seconds) reports each wait. */
export async function download(path, { onWait, signal } = {}) {
  for (;;) {
    const response = await fetch(path, { headers: { Authorization: `Bearer ${getKey() ?? ""}` }, signal, cache: "no-store" });
    if (response.status === 202) {
      const seconds = Number(response.headers.get("Retry-After") || 10);
      onWait?.(seconds);
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      continue;
    }
    if (!response.ok) {
      const text = await response.text();
      let data = text;
      try { data = JSON.parse(text); } catch { /* not JSON */ }
      throw new ApiError(response.status, describeError(data, response.status));
    }
    const name = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "")?.[1] || "download";
    const url = URL.createObjectURL(await response.blob());
    const link = Object.assign(document.createElement("a"), { href: url, download: name });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    return name;
  }
}

/** Parse a Server-Sent Events byte stream; returns leftover text. Calls onEvent({event, data, id}). */
export function parseSSE(buffer, onEvent, state) {
  const held = buffer.endsWith("\r") ? "\r" : "";  // may be the first half of a CRLF split across chunks
  const lines = (held ? buffer.slice(0, -1) : buffer).split(/\r\n|\r|\n/);
  const rest = lines.pop() + held;  // an incomplete last line waits for more bytes
  for (const line of lines) {
    if (line === "") {  // a blank line dispatches the event
      if (state.data.length) onEvent({ event: state.event || "message", data: state.data.join("\n"), id: state.id });
      state.event = "";
      state.data = [];
      continue;
    }
    if (line.startsWith(":")) continue;  // comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") state.event = value;
    else if (field === "data") state.data.push(value);
    else if (field === "id") state.id = value;
    else if (field === "retry" && /^\d+$/.test(value)) state.retry = Number(value);
  }
  return rest;
}

/**
 * Read an SSE route with fetch() (EventSource cannot send Authorization). Reconnects with Last-Event-ID
 * until an `end` event arrives or `signal` aborts. Returns a promise that settles when the stream is over.
 */
export async function streamEvents(path, { onEvent, onError, signal, lastEventId = "" }) {
  const state = { event: "", data: [], id: lastEventId, retry: 2000 };
  let ended = false;
  const handle = (ev) => {
    if (ev.event === "end") ended = true;
    onEvent(ev);
  };
  while (!ended && !signal.aborted) {
    try {
      const headers = { Authorization: `Bearer ${getKey() ?? ""}`, Accept: "text/event-stream" };
      if (state.id) headers["Last-Event-ID"] = state.id;
      const response = await fetch(path, { headers, signal, cache: "no-store" });
      if (!response.ok) {
        let body = null;
        try { body = await response.json(); } catch { /* ignore */ }
        const error = new ApiError(response.status, describeError(body, response.status));
        if (response.status >= 400 && response.status < 500) throw error;  // no point retrying
        onError?.(error);
      } else {
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer = parseSSE(buffer + decoder.decode(value, { stream: true }), handle, state);
          if (ended) { reader.cancel().catch(() => {}); break; }
        }
      }
    } catch (err) {
      if (err.name === "AbortError" || signal.aborted) return;
      if (err instanceof ApiError && err.status >= 400 && err.status < 500) { onError?.(err); return; }
      onError?.(err instanceof ApiError ? err : new ApiError(0, `live updates interrupted (${err.message}); retrying`));
    }
    if (!ended && !signal.aborted) await new Promise((r) => setTimeout(r, state.retry));
  }
}
