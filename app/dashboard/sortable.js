// A table sorted by clicking a column's header (again: the other way), shared by the run comparison's settings
// table and a sweep's trials. Empty cells sort last both ways; the sort is kept when the rows are replaced (a
// page that refreshes its data keeps the reader's order).

import { h } from "./ui.js";

/**
 * Fill `table` with `columns` (header texts) and `rows` ([{attrs, cells: [{sort, shown, attrs?}]}]); returns
 * setRows(rows), which redraws in the current order.
 */
export function sortable(table, rows, columns) {
  let by = null, dir = 1;
  const body = h("tbody");
  const headers = columns.map((c, i) => {
    const button = h("button", { type: "button", class: "link sort", "data-column": c }, c);
    button.addEventListener("click", () => { dir = by === i ? -dir : 1; by = i; draw(); });
    return h("th", { scope: "col" }, button);
  });
  function draw() {
    const sorted = by === null ? rows : [...rows].sort((a, b) => {
      const x = a.cells[by].sort, y = b.cells[by].sort;
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * dir;
    });
    headers.forEach((th, i) => {
      if (i === by) th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
    body.replaceChildren(...sorted.map((r) => h("tr", r.attrs,
      r.cells.map((c, i) => h("td", { "data-label": columns[i], ...c.attrs }, c.shown)))));
  }
  table.replaceChildren(h("thead", {}, h("tr", {}, headers)), body);
  draw();
  return (next) => { rows = next; draw(); };
}
