// #/webhooks: your webhook endpoints (GET /v1/webhooks), each with its latest deliveries (GET …/deliveries, read again
// every few seconds); a form that registers one (POST /v1/webhooks: its signing secret is shown once, here); and per
// endpoint: send a test event (POST …/test), disable or enable it (PATCH), delete it, redeliver a delivery.

import { api } from "./api.js";
import { clear, errorBox, field, fmtTime, h } from "./ui.js";

export const EVENT_TYPES = ["job.succeeded", "job.failed", "job.cancelled", "evaluation.completed",
  "evaluation.failed", "dataset.ready", "dataset.failed", "model.registered", "model.alias_moved",
  "pipeline.succeeded", "pipeline.failed", "pipeline.cancelled"];
const RECENT = 10;  // deliveries shown per endpoint
const REFRESH_MS = 4000;

function createForm(onCreated) {
  const url = h("input", { id: "webhook-url", type: "url", required: true, placeholder: "https://…/hooks/in",
                           maxlength: 2000, spellcheck: "false" });
  const description = h("input", { id: "webhook-description", maxlength: 500, placeholder: "optional" });
  const boxes = EVENT_TYPES.map((type) => h("label", { class: "field check event-choice" },
    h("input", { type: "checkbox", value: type, checked: type.startsWith("job.") }), h("code", {}, type)));
  const status = h("div", { id: "webhook-form-status", "aria-live": "polite" });
  const button = h("button", { type: "submit", id: "webhook-create" }, "Add endpoint");
  const form = h("form", { class: "card", id: "webhook-form", "aria-labelledby": "webhook-form-title" },
    h("h2", { id: "webhook-form-title" }, "New endpoint"),
    h("div", { class: "inline-form" }, field("Receiver URL", url, "http(s); a public address"),
      field("Description", description)),
    h("fieldset", { class: "event-choices" }, h("legend", {}, "Events"), boxes), status, button);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    status.replaceChildren();
    const events = boxes.map((b) => b.querySelector("input")).filter((b) => b.checked).map((b) => b.value);
    if (!events.length) { status.append(errorBox("Choose at least one event.")); return; }
    button.disabled = true;
    try {
      const body = { url: url.value.trim(), events };
      if (description.value.trim()) body.description = description.value.trim();
      const created = await api("/v1/webhooks", { method: "POST", json: body });
      url.value = "";
      description.value = "";
      onCreated(created);
    } catch (err) {
      status.append(errorBox(`Not added: ${err.message}`));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

function secretBox(webhook) {
  return h("div", { class: "card secret-box", id: "webhook-secret", role: "status" },
    h("strong", {}, "Signing secret of "), h("code", {}, webhook.url),
    h("p", { class: "muted" }, "Shown only this once: keep it with your receiver, which verifies each delivery's ",
      h("code", {}, "webhook-signature"), " with it (Standard Webhooks)."),
    h("pre", { class: "secret" }, webhook.secret));
}

function answerCell(d) {
  if (d.last_status_code == null && d.last_latency_ms == null) return "–";
  const code = d.last_status_code == null ? "no answer" : `HTTP ${d.last_status_code}`;
  return `${code}${d.last_latency_ms == null ? "" : ` · ${Math.round(d.last_latency_ms)} ms`}`;
}

function deliveryRow(webhook, d, onRedelivered) {
  const redeliver = h("button", { type: "button", class: "secondary small redeliver", disabled: !webhook.enabled },
    "Redeliver");
  redeliver.addEventListener("click", async () => {
    redeliver.disabled = true;
    try {
      await api(`/v1/webhooks/${webhook.id}/deliveries/${d.id}/redeliver`, { method: "POST" });
      onRedelivered();
    } catch (err) {
      redeliver.replaceWith(errorBox(err.message));
    }
  });
  const error = d.last_error ? h("span", { class: "delivery-error", title: d.last_error },
    d.last_error.length > 80 ? `${d.last_error.slice(0, 80)}…` : d.last_error) : "–";
  return h("tr", { "data-delivery": d.id, "data-status": d.status },
    h("td", { "data-label": "Event" }, h("code", {}, d.event_type)),
    h("td", { "data-label": "Status" }, h("span", { class: `badge status-${d.status}` }, d.status)),
    h("td", { "data-label": "Attempts", class: "num" }, `${d.attempts}/${d.max_attempts}`),
    h("td", { "data-label": "Last answer", class: "delivery-answer" }, answerCell(d)),
    h("td", { "data-label": "Error" }, error),
    h("td", { "data-label": "Next attempt" }, d.next_attempt_at ? fmtTime(d.next_attempt_at) : "–"),
    h("td", { "data-label": "Created" }, fmtTime(d.created_at)),
    h("td", { "data-label": "" }, redeliver));
}

function endpointCard(webhook, reload) {
  const body = h("tbody");
  const note = h("div", { "aria-live": "polite" });
  const test = h("button", { type: "button", class: "secondary send-test", disabled: !webhook.enabled }, "Send test event");
  const toggle = h("button", { type: "button", class: "secondary toggle" }, webhook.enabled ? "Disable" : "Enable");
  const remove = h("button", { type: "button", class: "danger delete" }, "Delete");
  const card = h("section", { class: "card webhook", "data-webhook": webhook.id, "data-enabled": String(webhook.enabled) },
    h("div", { class: "page-head" },
      h("div", {}, h("h2", {}, h("code", {}, webhook.url)),
        h("div", { class: "muted" }, webhook.description || "", webhook.description ? " · " : "",
          webhook.enabled ? "enabled" : "disabled", " · since ", fmtTime(webhook.created_at)),
        h("div", { class: "tags" }, webhook.events.map((e) => h("span", { class: "tag" }, e)))),
      h("div", { class: "inline" }, test, toggle, remove)),
    note,
    h("table", { class: "compact deliveries" },
      h("caption", { class: "sr-only" }, `Latest deliveries to ${webhook.url}`),
      h("thead", {}, h("tr", {}, ["Event", "Status", "Attempts", "Last answer", "Error", "Next attempt", "Created", ""]
        .map((t) => h("th", { scope: "col" }, t)))), body));
  async function act(button, request) {
    button.disabled = true;
    note.replaceChildren();
    try {
      await request();
      await reload();
    } catch (err) {
      note.replaceChildren(errorBox(err.message));
      button.disabled = false;
    }
  }
  test.addEventListener("click", () => act(test, () => api(`/v1/webhooks/${webhook.id}/test`, { method: "POST" })));
  toggle.addEventListener("click", () => act(toggle, () =>
    api(`/v1/webhooks/${webhook.id}`, { method: "PATCH", json: { enabled: !webhook.enabled } })));
  remove.addEventListener("click", () => {
    if (remove.dataset.armed !== "yes") {  // a second click deletes: no dialog to dismiss by accident
      remove.dataset.armed = "yes";
      remove.textContent = "Delete it and its deliveries";
      return;
    }
    act(remove, () => api(`/v1/webhooks/${webhook.id}`, { method: "DELETE" }));
  });
  async function loadDeliveries(signal) {
    const page = await api(`/v1/webhooks/${webhook.id}/deliveries?limit=${RECENT}`, { signal });
    body.replaceChildren(...page.data.map((d) => deliveryRow(webhook, d, reload)));
    if (!page.data.length) body.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No deliveries yet.")));
  }
  return { card, loadDeliveries };
}

export function renderWebhooks(container) {
  const list = h("div", { id: "webhooks" });
  const note = h("div", { "aria-live": "polite" });
  const secret = h("div");
  let cards = [];
  let timer = null, stopped = false, controller = null;
  async function reload() {
    clearTimeout(timer);
    controller?.abort();
    controller = new AbortController();
    const signal = controller.signal;
    try {
      const page = await api("/v1/webhooks?limit=100", { signal });
      cards = page.data.map((w) => endpointCard(w, reload));
      list.replaceChildren(...cards.map((c) => c.card));
      if (!page.data.length) list.append(h("p", { class: "muted" }, "No endpoints yet: add one above."));
      await refresh(signal);
      note.replaceChildren();
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(`Could not load webhooks: ${err.message}`));
    }
  }
  async function refresh(signal) {
    try {
      await Promise.all(cards.map((c) => c.loadDeliveries(signal)));
    } catch (err) {
      if (err.name === "AbortError") return;
      note.replaceChildren(errorBox(`Could not load deliveries: ${err.message}`));
    }
    if (!stopped) {
      timer = setTimeout(() => {
        controller = new AbortController();
        refresh(controller.signal);
      }, document.hidden ? 3 * REFRESH_MS : REFRESH_MS);
    }
  }
  clear(container,
    h("div", { class: "page-head" }, h("h1", {}, "Webhooks")),
    h("p", { class: "muted" }, "Endpoints that receive your events, signed per the Standard Webhooks specification. ",
      "A failed delivery is retried for over a day; the latest ten of each endpoint are shown."),
    createForm((created) => { secret.replaceChildren(secretBox(created)); reload(); }),
    secret, note, list);
  reload();
  return () => { stopped = true; clearTimeout(timer); controller?.abort(); };
}
