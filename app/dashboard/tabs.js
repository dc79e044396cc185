// A page in panels behind tabs (the job page, the model page): each tab is a link of its own (#/jobs/<id>/log), so a
// panel can be shared, bookmarked and reached with back and forward, and each panel is built the first time it is
// shown, so that it reads its data only when it is opened. Once built, a panel stays in the page while hidden: it
// keeps following a live job, and keeps its place for when the reader comes back.
//
// The WAI-ARIA tabs pattern with manual activation: the tabs are links in a tablist; the arrow keys, Home and End move
// the focus along them, Enter or Space opens the focused one (which changes the address, and the router shows it).

import { h } from "./ui.js";

const KEYS = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };

/**
 * panels: [{name, title, mount(el) -> hooks}], the first one shown by default; href(name) is a panel's address.
 * mount fills the panel's element the first time it is shown and may return hooks that the page calls:
 * {shown()} when the panel is shown again, and any others the page defines (see each()).
 */
export function panelTabs({ label, panels, href }) {
  const bar = h("div", { class: "tabs", role: "tablist", "aria-label": label });
  const box = h("div", { class: "tab-panels" });
  const items = panels.map((panel) => {
    const tab = h("a", { role: "tab", id: `tab-${panel.name}`, href: href(panel.name), "aria-controls": `panel-${panel.name}`,
      "aria-selected": "false", tabindex: -1, "data-panel": panel.name }, panel.title);
    const el = h("div", { role: "tabpanel", id: `panel-${panel.name}`, "aria-labelledby": tab.id, tabindex: 0,
      "data-panel": panel.name, hidden: true });
    bar.append(tab);
    box.append(el);
    return { ...panel, tab, el, hooks: null };
  });
  let current = null;

  bar.addEventListener("keydown", (e) => {
    const at = items.findIndex((item) => item.tab === document.activeElement);
    if (at < 0) return;
    let next = null;
    if (e.key in KEYS) next = (at + KEYS[e.key] + items.length) % items.length;
    else if (e.key === "Home") next = 0;
    else if (e.key === "End") next = items.length - 1;
    else if (e.key === " ") { e.preventDefault(); items[at].tab.click(); return; }  // Enter follows the link itself
    if (next === null) return;
    e.preventDefault();
    items[next].tab.focus();
  });

  /** Show the panel `name` (an unknown or missing one: the first), building it the first time. */
  function show(name) {
    const item = items.find((i) => i.name === name) || items[0];
    if (item === current) return item.name;
    const barTop = box.getBoundingClientRect().top + window.scrollY - bar.offsetHeight;
    for (const i of items) {
      const on = i === item;
      i.tab.setAttribute("aria-selected", String(on));
      i.tab.tabIndex = on ? 0 : -1;
      i.el.hidden = !on;
    }
    current = item;
    if (!item.hooks) item.hooks = item.mount(item.el) || {};
    else item.hooks.shown?.();
    // A reader far down a long panel who opens another (the bar sticks to the top) starts at the new panel's top.
    if (window.scrollY > barTop) window.scrollTo(0, barTop);
    // On a narrow screen the bar scrolls sideways: the open tab is in it.
    const tab = item.tab;
    if (tab.offsetLeft < bar.scrollLeft || tab.offsetLeft + tab.offsetWidth > bar.scrollLeft + bar.clientWidth) {
      bar.scrollLeft = tab.offsetLeft - (bar.clientWidth - tab.offsetWidth) / 2;
    }
    return item.name;
  }

  /** Call fn(hooks) for every panel built so far. */
  function each(fn) {
    for (const item of items) if (item.hooks) fn(item.hooks);
  }

  return { el: [bar, box], show, each };
}
