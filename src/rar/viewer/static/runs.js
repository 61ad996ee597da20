// RAR viewer: the run list.
"use strict";

// --- runs page -------------------------------------------------------------------------------

const COLUMNS = [
  ["status", "Status"],
  ["goal", "Goal"],
  ["created_at", "Created"],
  ["events", "Events"],
  ["mode", "Mode"],
  ["model", "Model"],
  ["parent", "Parent"],
  ["id", "Run"],
];

async function runsPage(root) {
  document.title = "Runs · RAR viewer";
  const filter = h("input", { id: "filter", type: "search", placeholder: "filter by goal or id…", "aria-label": "filter" });
  const status = h("select", { id: "status-filter", "aria-label": "status" }, h("option", { value: "" }, "all statuses"));
  const table = h("table", { id: "runs" });
  const count = h("span", { class: "muted", id: "runs-count" });
  append(clear(root), [h("h1", {}, "Runs"), h("div", { class: "controls" }, filter, status, count), table]);

  let runs;
  try {
    runs = (await api("/api/runs")).runs;
  } catch (err) {
    showError(root, err);
    return;
  }
  for (const s of [...new Set(runs.map((r) => r.status))].sort()) status.appendChild(h("option", { value: s }, s));
  let sortKey = "created_at";
  let sortDir = -1;

  const thead = h("thead", {}, h("tr", {}, COLUMNS.map(([key, label]) => h("th", { dataset: { key } }, label))));
  const tbody = h("tbody");
  append(table, [thead, tbody]);

  function render() {
    const q = filter.value.trim().toLowerCase();
    const st = status.value;
    const shown = runs
      .filter((r) => !st || r.status === st)
      .filter((r) => !q || r.id.toLowerCase().includes(q) || String(r.goal || "").toLowerCase().includes(q))
      .sort((a, b) => {
        const x = a[sortKey] ?? "";
        const y = b[sortKey] ?? "";
        const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return c * sortDir || String(a.id).localeCompare(String(b.id)) * sortDir;
      });
    for (const th of thead.querySelectorAll("th")) {
      th.classList.toggle("sorted-asc", th.dataset.key === sortKey && sortDir > 0);
      th.classList.toggle("sorted-desc", th.dataset.key === sortKey && sortDir < 0);
    }
    clear(tbody);
    for (const r of shown) {
      tbody.appendChild(h("tr", { class: "run-row", dataset: { id: r.id } },
        h("td", {}, badge(r.status || "unknown")),
        h("td", { class: "goal" }, h("a", { href: `/runs/${encodeURIComponent(r.id)}` }, r.goal || "(no goal)")),
        h("td", {}, r.created_at || ""),
        h("td", {}, r.events ?? ""),
        h("td", {}, r.mode ?? ""),
        h("td", {}, r.model ?? ""),
        h("td", {}, r.parent ? runLink(r.parent) : ""),
        h("td", { class: "muted" }, r.id)));
    }
    count.textContent = `${shown.length} of ${runs.length} runs`;
  }
  thead.addEventListener("click", (ev) => {
    const th = ev.target.closest("th");
    if (!th) return;
    if (th.dataset.key === sortKey) sortDir = -sortDir;
    else { sortKey = th.dataset.key; sortDir = 1; }
    render();
  });
  filter.addEventListener("input", render);
  status.addEventListener("change", render);
  render();
}

