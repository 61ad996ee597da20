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

// rows drawn at first: a store of 10,000 runs opens as fast as a small one
const RUNS_SHOWN = 500;

function selectOf(id, label, values) {
  const el = h("select", { id, "aria-label": label }, h("option", { value: "" }, `all ${label}s`));
  for (const v of values) el.appendChild(h("option", { value: v }, v));
  return el;
}

function distinct(runs, key) {
  return [...new Set(runs.map((r) => r[key]).filter((v) => v !== null && v !== undefined && v !== ""))]
    .map(String).sort();
}

async function runsPage(root) {
  document.title = "Runs · RAR viewer";
  const filter = h("input", { id: "filter", type: "search", placeholder: "filter by goal or id…", "aria-label": "filter" });
  const table = h("table", { id: "runs" });
  const count = h("span", { class: "muted", id: "runs-count" });
  const controls = h("div", { class: "controls" });
  const compare = h("button", { type: "button", id: "compare", disabled: true, title: "tick two runs to compare them" }, "Compare 2 selected");
  append(clear(root), [h("h1", {}, "Runs"), controls, table]);

  let runs;
  try {
    runs = (await api("/api/runs")).runs;
  } catch (err) {
    showError(root, err);
    return;
  }
  const status = selectOf("status-filter", "status", distinct(runs, "status"));
  const mode = selectOf("mode-filter", "mode", distinct(runs, "mode"));
  const model = selectOf("model-filter", "model", distinct(runs, "model"));
  const since = h("input", { id: "since-filter", type: "date", "aria-label": "created on or after", title: "created on or after" });
  const until = h("input", { id: "until-filter", type: "date", "aria-label": "created on or before", title: "created on or before" });
  append(controls, [filter, status, mode, model, h("label", { class: "muted" }, "from ", since),
    h("label", { class: "muted" }, "to ", until), compare, count]);
  if (!runs.length) {
    append(root, [h("p", { class: "muted", id: "no-runs" },
      "This store has no runs yet. Record one with `rar demo` or `rar run \"your question\"`.")]);
  }
  if (CONTROLS.runsPage && !OFFLINE) CONTROLS.runsPage(root, runs);
  let sortKey = "created_at";
  let sortDir = -1;
  let showAll = false;
  const picked = [];

  const thead = h("thead", {}, h("tr", {}, h("th", { class: "pick", title: "pick two to compare" }, "⇄"),
    COLUMNS.map(([key, label]) => h("th", { dataset: { key } }, label))));
  const tbody = h("tbody");
  append(table, [thead, tbody]);

  function updateCompare() {
    compare.disabled = picked.length !== 2;
    compare.textContent = picked.length === 2 ? "Compare the 2 selected" : `Compare (pick ${2 - picked.length} more)`;
  }
  compare.addEventListener("click", () => {
    if (picked.length !== 2) return;
    location.href = `/diff?${new URLSearchParams({ a: picked[0], b: picked[1] })}`;
  });

  function render() {
    const q = filter.value.trim().toLowerCase();
    const want = { status: status.value, mode: mode.value, model: model.value };
    const from = since.value;
    const to = until.value;
    const shown = runs
      .filter((r) => Object.entries(want).every(([k, v]) => !v || String(r[k] ?? "") === v))
      .filter((r) => !from || String(r.created_at || "") >= from)
      .filter((r) => !to || String(r.created_at || "").slice(0, to.length) <= to)
      .filter((r) => !q || r.id.toLowerCase().includes(q) || String(r.goal || "").toLowerCase().includes(q))
      .sort((a, b) => {
        const x = a[sortKey] ?? "";
        const y = b[sortKey] ?? "";
        const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return c * sortDir || String(a.id).localeCompare(String(b.id)) * sortDir;
      });
    for (const th of thead.querySelectorAll("th[data-key]")) {
      th.classList.toggle("sorted-asc", th.dataset.key === sortKey && sortDir > 0);
      th.classList.toggle("sorted-desc", th.dataset.key === sortKey && sortDir < 0);
    }
    clear(tbody);
    const limit = showAll ? shown.length : Math.min(shown.length, RUNS_SHOWN);
    for (const r of shown.slice(0, limit)) {
      const box = h("input", { type: "checkbox", class: "pick-run", "aria-label": `pick ${r.id}` });
      box.checked = picked.includes(r.id);
      box.addEventListener("change", () => {
        const at = picked.indexOf(r.id);
        if (box.checked && at < 0) picked.push(r.id);
        if (!box.checked && at >= 0) picked.splice(at, 1);
        while (picked.length > 2) picked.shift();
        for (const other of tbody.querySelectorAll("input.pick-run")) {
          other.checked = picked.includes(other.closest("tr").dataset.id);
        }
        updateCompare();
      });
      tbody.appendChild(h("tr", { class: "run-row", dataset: { id: r.id } },
        h("td", { class: "pick" }, box),
        h("td", {}, badge(r.status || "unknown")),
        h("td", { class: "goal" }, h("a", { href: `/runs/${encodeURIComponent(r.id)}` }, r.goal || "(no goal)")),
        h("td", {}, r.created_at || ""),
        h("td", {}, r.events ?? ""),
        h("td", {}, r.mode ?? ""),
        h("td", {}, r.model ?? ""),
        h("td", {}, r.parent ? runLink(r.parent) : ""),
        h("td", { class: "muted" }, r.id)));
    }
    if (limit < shown.length) {
      const all = h("button", { type: "button", id: "show-all-runs" }, `show all ${shown.length}`);
      all.addEventListener("click", () => { showAll = true; render(); });
      tbody.appendChild(h("tr", { class: "more-runs" }, h("td", { colspan: COLUMNS.length + 1, class: "muted" },
        `the first ${limit} of ${shown.length} shown (filter, sort, or `, all, ")")));
    }
    count.textContent = `${shown.length} of ${runs.length} runs`;
  }
  thead.addEventListener("click", (ev) => {
    const th = ev.target.closest("th[data-key]");
    if (!th) return;
    if (th.dataset.key === sortKey) sortDir = -sortDir;
    else { sortKey = th.dataset.key; sortDir = 1; }
    render();
  });
  let typing = null;
  filter.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(render, runs.length > RUNS_SHOWN ? 150 : 0);
  });
  for (const el of [status, mode, model, since, until]) el.addEventListener("change", render);
  updateCompare();
  render();
}
