// A job's log: what its worker said about it (GET /v1/jobs/{id}/logs), in a scrolling monospace panel that
// follows the job: new lines are appended while it runs (polled with `after`), and for a few seconds after it ends
// (its last lines follow its final status).

import { api } from "./api.js";
import { errorBox, h } from "./ui.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled", "pruned"]);
const POLL_MS = 2000;
const POLLS_AFTER_END = 3;

function lineView(line) {
  const time = new Date(line.time).toLocaleTimeString("en-GB", { hour12: false });
  const origin = line.attempt ? `${line.logger}, attempt ${line.attempt}` : line.logger;
  return h("div", { class: `log-line log-${line.level}`, "data-seq": line.seq, title: origin },
    h("span", { class: "log-time" }, time), " ",
    h("span", { class: "log-level" }, line.level.toUpperCase().padEnd(8)), " ",
    line.message);
}

/** Append the log panel of job `jobId` to `container`; it stops when `signal` aborts. Returns the hook the job page
 * calls when the panel is shown again: the reader's place in the log (display: none forgets it). */
export function mountLogs(container, jobId, signal) {
  const empty = h("p", { class: "muted", id: "job-log-empty" }, "Loading…");
  const panel = h("div", { class: "log-panel", id: "job-log", role: "log", tabindex: 0 }, empty);
  const note = h("div", { id: "job-log-note", "aria-live": "polite" });
  container.append(h("section", { class: "card", id: "logs" }, h("h2", {}, "Log"), panel, note));
  let after = 0, ended = 0, timer = null, place = null;  // place: where the reader scrolled to (null: following)
  panel.addEventListener("scroll", () => {
    if (!panel.clientHeight) return;  // hidden
    place = panel.scrollTop + panel.clientHeight >= panel.scrollHeight - 8 ? null : panel.scrollTop;
  });

  async function poll() {
    try {
      let page;
      do {
        page = await api(`/v1/jobs/${jobId}/logs?after=${after}&limit=500`, { signal });
        const following = place === null;
        if (page.lines.length) empty.remove();
        panel.append(...page.lines.map(lineView));
        after = page.next_after;
        if (following) panel.scrollTop = panel.scrollHeight;  // a reader who scrolled up stays where they are
      } while (page.has_more);
      if (!after) empty.textContent = "Nothing logged yet.";
      note.replaceChildren();
      ended = TERMINAL.has(page.status) ? ended + 1 : 0;
      if (ended >= POLLS_AFTER_END) return;
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(`Log: ${err.message}`));
    }
    timer = setTimeout(poll, POLL_MS);
  }
  signal.addEventListener("abort", () => clearTimeout(timer));
  poll();
  return { shown: () => { panel.scrollTop = place ?? panel.scrollHeight; } };
}
