// The organisation's usage and quotas (GET /v1/usage), a small panel on the jobs page: bytes stored, jobs queued or
// running, worker minutes today (UTC), each against its limit (none: unlimited).

import { api } from "./api.js";
import { fmtBytes, h } from "./ui.js";

function meter(id, label, used, limit, show) {
  const fraction = limit > 0 ? Math.min(1, used / limit) : 0;
  const text = limit > 0 ? `${show(used)} of ${show(limit)}` : `${show(used)} · no limit`;
  const level = fraction >= 1 ? "full" : fraction >= 0.8 ? "high" : "ok";
  return h("div", { class: "usage-meter", id, "data-level": level },
    h("span", { class: "usage-label" }, label), h("span", { class: "usage-value" }, text),
    limit > 0 ? h("progress", { max: 1, value: fraction, "aria-label": `${label}: ${text}` }) : null);
}

/** The panel; it fills itself in (and stays empty if the answer does not come). */
export function usagePanel() {
  const panel = h("section", { class: "card usage-panel", id: "usage", "aria-label": "Usage and quotas" });
  api("/v1/usage").then((u) => {
    panel.replaceChildren(
      meter("usage-storage", "Stored", u.storage_bytes, u.storage_limit_bytes, fmtBytes),
      meter("usage-jobs", "Active jobs", u.active_jobs, u.active_jobs_limit, String),
      meter("usage-minutes", "Worker minutes today", u.worker_minutes_today, u.worker_minutes_per_day_limit,
        (m) => `${Math.round(m)}`));
  }).catch(() => panel.remove());
  return panel;
}
