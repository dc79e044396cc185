// A multipart POST that reports the bytes sent as they go: XMLHttpRequest's upload.onprogress (fetch() cannot
// report an upload's progress). Answers and errors as api() gives them.

import { ApiError, describeError, getKey } from "./api.js";

/**
 * POST `form` to `path` with the key; onProgress(sent, total) as the browser sends the body (total: the multipart
 * body's bytes, a little more than the file's). Resolves with the JSON answer; rejects with an ApiError, or an
 * AbortError when `signal` aborts.
 */
export function postWithProgress(path, form, { onProgress, signal } = {}) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    xhr.setRequestHeader("Authorization", `Bearer ${getKey() ?? ""}`);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.addEventListener("progress", (e) => onProgress?.(e.loaded, e.lengthComputable ? e.total : null));
    xhr.addEventListener("load", () => {
      let data = xhr.responseText;
      try { data = data ? JSON.parse(data) : null; } catch { /* not JSON: keep the text */ }
      if (xhr.status >= 200 && xhr.status < 300) { resolve(data); return; }
      if (xhr.status === 401) window.dispatchEvent(new CustomEvent("api-unauthorized"));
      reject(new ApiError(xhr.status, describeError(data, xhr.status)));
    });
    xhr.addEventListener("error", () => reject(new ApiError(0, "cannot reach the service (the upload was interrupted)")));
    xhr.addEventListener("abort", () => reject(new DOMException("the upload was cancelled", "AbortError")));
    if (signal) {
      if (signal.aborted) { reject(new DOMException("the upload was cancelled", "AbortError")); return; }
      signal.addEventListener("abort", () => xhr.abort(), { once: true });
    }
    xhr.send(form);
  });
}
