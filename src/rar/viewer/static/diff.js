// RAR viewer: the diff page, /diff?a=RUN&b=RUN — two runs aligned step by step.
// Everything comes from GET /api/diff (rar.replay.diff.diff_runs(...).as_dict()); the step
// labels and the payloads shown when a row is clicked come from each run's events and
// /api/payload, fetched on demand. Every recorded value is inserted as text.
"use strict";

async function diffPage(root, a, b) {
  return DIFF_VIEW.page(root, a, b);
}

// The page's helpers live in this closure so that they add no names to the shared global scope.
const DIFF_VIEW = (() => {
  const BLOCK = 500; // side-by-side rows rendered at a time
  const EVENTS_PAGE = 1000;
  const STATUS_ORDER = ["same", "different-request", "different-response", "different-result",
    "error-differs", "extra-in-a", "extra-in-b"];
  const PAYLOAD_ORDER = ["request", "result", "content", "anchors", "report", "value"];

  function cls(text) {
    return String(text).replace(/[^a-z0-9_-]/gi, "");
  }

  function backLink() {
    return h("a", { href: "/", class: "back-to-runs" }, "← all runs");
  }

  function compareForm(a, b) {
    return h("form", { class: "controls diff-form", id: "diff-form", method: "get", action: "/diff" },
      h("input", { name: "a", value: a, placeholder: "run A (id or prefix)", "aria-label": "run A" }),
      h("input", { name: "b", value: b, placeholder: "run B (id or prefix)", "aria-label": "run B" }),
      h("button", { type: "submit" }, "Compare"));
  }

  function failure(root, message, a, b) {
    append(root, [
      h("div", { class: "error-box", id: "diff-error" },
        h("div", { class: "error-message" }, String(message)),
        h("p", {}, h("a", { href: "/", id: "back-to-runs" }, "Back to all runs"))),
      compareForm(a, b),
    ]);
  }

  function short(value, width = 120) {
    const text = value === undefined ? "" : json(value);
    return text.length > width ? `${text.slice(0, width - 1)}…` : text;
  }

  function num(value) {
    if (value === null || value === undefined) return "—";
    if (typeof value !== "number") return String(value);
    return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(6)));
  }

  // --- page --------------------------------------------------------------------------------

  async function page(root, a, b) {
    document.title = `Diff ${a} ↔ ${b} · RAR viewer`;
    clear(root);
    append(root, [h("p", {}, backLink()), h("h1", {}, "Diff")]);
    if (!a || !b) {
      append(root, [h("p", { class: "muted", id: "diff-help" },
        "Compare two runs: give both, as ids or unique id prefixes."), compareForm(a, b)]);
      return;
    }
    let d;
    try {
      d = await api(`/api/diff?${new URLSearchParams({ a, b })}`);
    } catch (err) {
      failure(root, err && err.message ? err.message : err, a, b);
      return;
    }
    if (d.a.run_id === d.b.run_id) {
      failure(root, `both sides name run ${d.a.run_id}; give two different runs`, a, b);
      return;
    }
    document.title = `Diff ${d.a.run_id} ↔ ${d.b.run_id} · RAR viewer`;
    root.querySelector("h1").textContent = "Diff of two runs";
    const view = {
      d,
      sides: { a: newSide(d.a.run_id), b: newSide(d.b.run_id) },
    };
    const steps = h("div", { id: "diff-steps-box" });
    append(root, [
      header(d),
      h("h2", {}, "First divergence"), divergence(d),
      h("h2", {}, `Steps side by side (${d.steps.length})`), steps,
      h("h2", {}, "Answer"), answer(d),
      h("h2", {}, "Evidence"), evidence(d),
      h("h2", {}, "Usage, cost and latency"), metrics(d),
      h("h2", {}, "Manifest"), manifest(d),
    ]);
    sideBySide(view, steps);
    const jump = root.querySelector("#jump-to-divergence");
    if (jump) {
      jump.addEventListener("click", (e) => {
        e.preventDefault();
        revealDivergence(view, true);
      });
    }
    revealDivergence(view, location.hash === "#first-divergence");
  }

  // --- header and verdict ------------------------------------------------------------------

  function runCard(letter, side) {
    return h("div", { class: `diff-run side-${letter}`, id: `diff-run-${letter}` },
      h("div", { class: "diff-run-head" },
        h("span", { class: "side-letter" }, letter.toUpperCase()), " ",
        h("a", { href: `/runs/${encodeURIComponent(side.run_id)}`, class: "run-link" }, side.run_id), " ",
        badge(side.status || "unknown")),
      h("div", { class: "diff-goal" }, side.goal === null || side.goal === undefined ? "(no goal)" : String(side.goal)),
      h("div", { class: "muted" }, `${side.events} events, ${side.steps} steps`));
  }

  function header(d) {
    const counts = h("div", { class: "diff-counts", id: "diff-counts" });
    for (const status of STATUS_ORDER) {
      const n = (d.counts || {})[status] || 0;
      if (!n) continue;
      counts.appendChild(h("span", { class: `count status-${cls(status)}`, dataset: { status } },
        `${n} ${status}`));
    }
    if (!counts.children.length) counts.appendChild(h("span", { class: "muted" }, "no steps"));
    const verdict = d.equivalent
      ? h("span", { class: "badge ok verdict", id: "diff-verdict", dataset: { equivalent: "true" } }, "equivalent")
      : h("span", { class: "badge bad verdict", id: "diff-verdict", dataset: { equivalent: "false" } }, "different");
    const answerNote = d.answer.equal ? "same answer" : "the answers differ";
    return h("section", { class: "diff-header", id: "diff-header" },
      h("div", { class: "diff-runs" }, runCard("a", d.a), h("div", { class: "diff-arrow" }, "↔"), runCard("b", d.b)),
      h("div", { class: "diff-verdict-line" }, verdict, " ",
        h("span", { class: "muted", id: "diff-answer-note" }, answerNote), counts));
  }

  // --- first divergence ----------------------------------------------------------------------

  function where(side, letter) {
    if (!side) return h("span", { class: "muted" }, `— no step in ${letter.toUpperCase()}`);
    return h("span", {}, `event #${side.seq}, ordinal ${side.ordinal}`);
  }

  function fieldValue(field, which) {
    const absent = (which === "a" && field.change === "added") || (which === "b" && field.change === "removed");
    if (absent) return h("td", { class: `value value-${which} absent muted` }, "(absent)");
    return h("td", { class: `value value-${which}` }, h("code", {}, JSON.stringify(field[which] === undefined ? null : field[which])));
  }

  function fieldTable(fields, id) {
    const table = h("table", { class: "diff-fields", id },
      h("thead", {}, h("tr", {}, h("th", {}, "Field"), h("th", {}, "Change"), h("th", {}, "A"), h("th", {}, "B"))));
    const body = h("tbody");
    for (const f of fields) {
      body.appendChild(h("tr", { class: `field change-${cls(f.change)}`, dataset: { path: f.path } },
        h("td", { class: "path" }, h("code", {}, String(f.path))),
        h("td", { class: "change" }, String(f.change)),
        fieldValue(f, "a"), fieldValue(f, "b")));
    }
    table.appendChild(body);
    return table;
  }

  function divergence(d) {
    const first = d.first_divergence;
    const box = h("section", { class: "diff-divergence", id: "divergence" });
    if (!first) {
      box.classList.add("none");
      box.appendChild(h("p", { id: "divergence-none" }, d.steps.length
        ? `No step differs: all ${d.steps.length} steps are the same.`
        : "Neither run has any step."));
      if (!d.answer.equal) box.appendChild(h("p", { class: "problems" }, "The final answers differ (see below)."));
      return box;
    }
    append(box, [
      h("div", { class: "divergence-title" },
        h("span", { class: `badge reason reason-${cls(first.status)}`, id: "divergence-reason" }, first.status), " ",
        h("span", { id: "divergence-text" }, String(first.reason || "")), " ",
        h("a", { href: "#first-divergence", id: "jump-to-divergence" }, "jump to the step ↓")),
      h("dl", { class: "summary divergence-where" },
        h("dt", {}, "Step"), h("dd", { id: "divergence-step" }, `${first.index + 1} of ${d.steps.length}`),
        h("dt", {}, "Span"), h("dd", { id: "divergence-span" }, h("code", {}, String(first.span))),
        h("dt", {}, "Kind"), h("dd", { id: "divergence-kind" }, String(first.kind)),
        h("dt", {}, "A"), h("dd", { id: "divergence-a" }, where(first.a, "a")),
        h("dt", {}, "B"), h("dd", { id: "divergence-b" }, where(first.b, "b")),
        first.compared ? [h("dt", {}, "Compared"), h("dd", {}, String(first.compared))] : null),
    ]);
    if ((first.fields || []).length) box.appendChild(fieldTable(first.fields, "divergence-fields"));
    else if (first.compared) box.appendChild(h("p", { class: "muted" }, "No field-level difference recorded."));
    if (first.fields_omitted) {
      box.appendChild(h("p", { class: "muted" }, `… and ${first.fields_omitted} more differing fields`));
    }
    if (first.detail !== null && first.detail !== undefined) {
      append(box, [h("div", { class: "muted" }, `The step in ${first.a ? "A" : "B"} only:`),
        h("pre", { id: "divergence-detail" }, String(first.detail))]);
    }
    return box;
  }

  // --- side by side ----------------------------------------------------------------------------

  function newSide(runId) {
    return { id: runId, events: new Map(), all: false, queue: Promise.resolve() };
  }

  // Load the events with these seqs (a page of up to 1000 from seq - 1 on; the whole log when
  // positions and seqs disagree). Calls run one after the other per run.
  function loadEvents(side, seqs) {
    const work = side.queue.then(async () => {
      const want = [...new Set(seqs)].filter((s) => !side.events.has(s)).sort((x, y) => x - y);
      for (const seq of want) {
        if (side.all) break;
        if (side.events.has(seq)) continue;
        const q = new URLSearchParams({ offset: String(Math.max(0, seq - 1)), limit: String(EVENTS_PAGE) });
        const got = await api(`/api/runs/${encodeURIComponent(side.id)}/events?${q}`);
        for (const ev of got.events) side.events.set(ev.seq, ev);
        if (!side.events.has(seq)) await loadAll(side);
      }
    });
    side.queue = work.catch(() => {});
    return work;
  }

  async function loadAll(side) {
    let offset = 0;
    while (offset !== null && offset !== undefined) {
      const q = new URLSearchParams({ offset: String(offset), limit: String(EVENTS_PAGE) });
      const got = await api(`/api/runs/${encodeURIComponent(side.id)}/events?${q}`);
      for (const ev of got.events) side.events.set(ev.seq, ev);
      offset = got.next_offset;
    }
    side.all = true;
  }

  function inline(ref) {
    return ref && typeof ref === "object" && "value" in ref ? ref.value : undefined;
  }

  function stepLabel(ev) {
    if (!ev) return "";
    let label = "";
    if (ev.type === "effect") {
      const req = inline(ev.request);
      if (req && typeof req === "object" && !Array.isArray(req)) {
        const inner = req.request && typeof req.request === "object" ? req.request : {};
        const name = req.name ?? req.tool ?? req.op ?? req.model ?? inner.model;
        if (name !== undefined && name !== null) label = typeof name === "string" ? name : short(name, 40);
      } else if (typeof req === "string") {
        label = short(req, 40);
      }
      if (ev.error) label += `${label ? " " : ""}✗ ${ev.error.type || "error"}`;
    } else if (ev.type === "message") {
      label = `${ev.performative || ""} ${ev.sender || ""} → ${(ev.receivers || []).join(", ")}`.trim();
    } else if (ev.type === "evidence") {
      const anchors = inline(ev.anchors);
      label = Array.isArray(anchors) ? `${anchors.length} anchors` : "anchors";
    } else if (ev.type === "audit") {
      label = "report";
    }
    return label;
  }

  // The table is a grid of <div> rows (role table/row/cell) in blocks of BLOCK rows, each block
  // with content-visibility: auto: a block off screen costs no layout, so 10k rows stay fast
  // (an HTML table lays out all its rows again whenever one changes).
  function cell(name, letter, text, extra) {
    return h("div", { role: "cell", class: `cell ${name}${letter ? ` side-${letter}` : ""}`, ...(extra || {}) }, text);
  }

  function sideCells(step, letter, aligned) {
    if (!step) return [cell("gap-cell", letter, `— no step in ${letter.toUpperCase()} —`)];
    return [
      cell("seq", letter, `#${step.seq}`),
      cell("kind", letter, String(aligned.kind)),
      cell("span", letter, String(aligned.span), { title: String(aligned.span) }),
      cell("label", letter, "", { dataset: { seq: step.seq } }),
    ];
  }

  function stepRow(view, step) {
    const first = view.d.first_divergence;
    const isFirst = first && first.index === step.index;
    const kind = step.status === "same" ? "same" : "differs";
    return h("div", {
      role: "row",
      class: `step status-${cls(step.status)} ${kind}${isFirst ? " first-divergence" : ""}`,
      id: isFirst ? "first-divergence" : null,
      tabindex: "0",
      dataset: {
        index: step.index, status: step.status,
        aSeq: step.a ? step.a.seq : "", bSeq: step.b ? step.b.seq : "",
      },
    },
    cell("index", null, String(step.index + 1)),
    sideCells(step.a, "a", step),
    cell("status", null, step.status === "same" ? h("span", { class: "muted" }, "=")
      : h("span", { class: `badge reason reason-${cls(step.status)}` }, step.status)),
    sideCells(step.b, "b", step));
  }

  function headRow(cells) {
    return h("div", { role: "row", class: "head-row" }, cells.flat());
  }

  function sideBySide(view, box) {
    const { d } = view;
    if (!d.steps.length) {
      box.appendChild(h("p", { class: "muted", id: "diff-steps-empty" }, "Neither run has any step."));
      return;
    }
    const only = h("input", { type: "checkbox", id: "diff-only-differences" });
    const info = h("span", { class: "muted", id: "diff-steps-info" });
    const body = h("div", { role: "rowgroup", class: "diff-steps-body" });
    const head = (text, extra) => h("div", { role: "columnheader", class: `cell ${extra || ""}` }, text);
    const table = h("div", { role: "table", class: "diff-steps", id: "diff-steps", "aria-label": "steps side by side" },
      h("div", { role: "rowgroup", class: "diff-steps-head" },
        headRow([head("", "index"), head(`A · ${d.a.run_id}`, "run side-a"), head("", "status"),
          head(`B · ${d.b.run_id}`, "run side-b")]),
        headRow([head("step", "index"),
          ["seq", "kind", "span", "label"].map((n) => head(n, `${n} side-a`)),
          head("status", "status"),
          ["seq", "kind", "span", "label"].map((n) => head(n, `${n} side-b`))])),
      body);
    const wrap = h("div", { class: "diff-steps-wrap", id: "diff-steps-wrap" }, table);
    append(box, [
      h("div", { class: "controls" },
        h("label", {}, only, " only the steps that differ"), info,
        h("span", { class: "muted" }, "· click a step to compare its payloads")),
      wrap,
    ]);
    only.addEventListener("change", () => table.classList.toggle("only-differences", only.checked));

    const state = {
      view, body, info, wrap,
      nblocks: Math.ceil(d.steps.length / BLOCK),
      blocks: new Map(), // block number → its element
      rows: new Map(), // step index → its row
    };
    view.table = state;
    showBlock(state, 0, false);
    const first = d.first_divergence;
    if (first) showBlock(state, Math.floor(first.index / BLOCK), false);
    layoutGaps(state);

    body.addEventListener("click", (e) => {
      const target = e.target instanceof Element ? e.target : null;
      if (!target || target.closest("a, button, .diff-detail")) return;
      const row = target.closest(".step");
      if (row) toggleDetail(view, row);
    });
    body.addEventListener("keydown", (e) => {
      const target = e.target instanceof Element ? e.target : null;
      if (e.key !== "Enter" || !target || !target.matches(".step")) return;
      e.preventDefault();
      toggleDetail(view, target);
    });
  }

  function showBlock(state, k, relayout = true) {
    if (k < 0 || k >= state.nblocks || state.blocks.has(k)) return;
    const steps = state.view.d.steps.slice(k * BLOCK, (k + 1) * BLOCK);
    const block = h("div", { class: "diff-block", role: "presentation", dataset: { block: k } });
    block.style.containIntrinsicSize = `auto ${steps.length * 23}px`;
    for (const step of steps) {
      const row = stepRow(state.view, step);
      state.rows.set(step.index, row);
      block.appendChild(row);
    }
    let next = null;
    for (let j = k + 1; j < state.nblocks; j++) {
      if (state.blocks.has(j)) { next = state.blocks.get(j); break; }
    }
    state.blocks.set(k, block);
    state.body.insertBefore(block, next);
    if (relayout) layoutGaps(state);
    fillLabels(state, steps);
  }

  // One line per stretch of steps not rendered yet, with buttons showing the next block of it
  // or all of it.
  function layoutGaps(state) {
    for (const gap of state.body.querySelectorAll(".diff-gap")) gap.remove();
    const total = state.view.d.steps.length;
    let k = 0;
    while (k < state.nblocks) {
      if (state.blocks.has(k)) { k++; continue; }
      let end = k;
      while (end + 1 < state.nblocks && !state.blocks.has(end + 1)) end++;
      const from = k * BLOCK;
      const to = Math.min((end + 1) * BLOCK, total);
      const next = end + 1 < state.nblocks ? state.blocks.get(end + 1) : null;
      const block = k;
      const last = end;
      const more = h("button", { type: "button", class: "show-more", id: next === null ? "diff-show-more" : null },
        `show ${Math.min(BLOCK, to - from)} more`);
      more.addEventListener("click", () => showBlock(state, block));
      const all = h("button", { type: "button", class: "show-all" }, `show all ${to - from}`);
      all.addEventListener("click", () => showProgressively(state, block, last));
      state.body.insertBefore(h("div", { class: "diff-gap", role: "row", dataset: { from, to } },
        `Steps ${from + 1}–${to} not shown (${to - from}) `, more, " ", to - from > BLOCK ? all : null), next);
      k = end + 1;
    }
    state.info.textContent = `${state.rows.size} of ${total} steps shown`;
  }

  // Blocks k..end, one per animation frame, so that the page stays responsive meanwhile.
  function showProgressively(state, k, end) {
    const next = () => {
      while (k <= end && state.blocks.has(k)) k++;
      if (k > end) return;
      showBlock(state, k);
      requestAnimationFrame(next);
    };
    next();
  }

  function fillLabels(state, steps) {
    const { view } = state;
    for (const letter of ["a", "b"]) {
      const side = view.sides[letter];
      const seqs = steps.filter((s) => s[letter]).map((s) => s[letter].seq);
      if (!seqs.length) continue;
      loadEvents(side, seqs).then(() => {
        for (const step of steps) {
          if (!step[letter]) continue;
          const row = state.rows.get(step.index);
          const label = row && row.querySelector(`.label.side-${letter}`);
          if (label) label.textContent = stepLabel(side.events.get(step[letter].seq));
        }
      }).catch((err) => {
        state.info.textContent = `could not load the events of ${letter.toUpperCase()}: ${err.message}`;
      });
    }
  }

  function revealDivergence(view, scrollPage) {
    const row = document.getElementById("first-divergence");
    if (!row || !view.table) return;
    const wrap = view.table.wrap;
    const box = wrap.getBoundingClientRect();
    if (!scrollPage && box.top > window.innerHeight - 4 * row.offsetHeight) scrollPage = true;
    // centre the row in the part of the table's box that is on screen (all of it once the page
    // scrolls), below the sticky column headings
    const head = wrap.querySelector(".diff-steps-head").getBoundingClientRect().height;
    const top = scrollPage ? box.top + head : Math.max(box.top, 0) + head;
    const bottom = scrollPage ? box.bottom : Math.min(box.bottom, window.innerHeight);
    const offset = row.getBoundingClientRect().top - box.top;
    wrap.scrollTop += offset - (top - box.top) - Math.max(0, (bottom - top - row.offsetHeight) / 2);
    if (scrollPage) {
      row.scrollIntoView({ block: "center" });
      row.classList.remove("flash");
      void row.offsetWidth; // restart the animation
      row.classList.add("flash");
    }
  }

  // --- a step's payloads, both sides next to each other ------------------------------------

  function toggleDetail(view, row) {
    const next = row.nextElementSibling;
    if (next && next.classList.contains("diff-detail")) {
      next.remove();
      row.classList.remove("open");
      return;
    }
    const index = Number(row.dataset.index);
    const step = view.d.steps[index];
    const grid = h("div", { class: "diff-detail-grid" });
    row.after(h("div", { class: "diff-detail", role: "row", dataset: { index } }, grid));
    row.classList.add("open");
    for (const letter of ["a", "b"]) {
      const box = h("div", { class: `detail-side side-${letter}` });
      grid.appendChild(box);
      fillSide(view, letter, step[letter], box);
    }
  }

  async function fillSide(view, letter, where, box) {
    const L = letter.toUpperCase();
    if (!where) {
      box.appendChild(h("p", { class: "muted" }, `— no step in ${L} —`));
      return;
    }
    const side = view.sides[letter];
    box.appendChild(h("div", { class: "detail-head" }, `${L} · event #${where.seq}`));
    try {
      await loadEvents(side, [where.seq]);
    } catch (err) {
      box.appendChild(h("pre", { class: "problems" }, `could not load: ${err.message}`));
      return;
    }
    const ev = side.events.get(where.seq);
    if (!ev) {
      box.appendChild(h("pre", { class: "problems" }, `event #${where.seq} is not in the log`));
      return;
    }
    if (ev.type === "message") {
      box.appendChild(h("pre", { class: "payload payload-header" }, json({
        performative: ev.performative, sender: ev.sender, receivers: ev.receivers,
        conversation_id: ev.conversation_id, reply_to: ev.reply_to,
      })));
    }
    const fields = Object.keys(ev).filter((k) => isPayloadRef(ev[k]));
    fields.sort((x, y) => (PAYLOAD_ORDER.indexOf(x) + 1 || 99) - (PAYLOAD_ORDER.indexOf(y) + 1 || 99));
    for (const field of fields) {
      const pre = h("pre", { class: `payload payload-${cls(field)}` }, "loading…");
      append(box, [h("div", { class: "muted" }, `${field} (${ev[field].size} bytes)`), pre]);
      payloadValue(side.id, ev, field)
        .then((value) => { pre.textContent = json(value); })
        .catch((err) => { pre.textContent = `could not load: ${err.message}`; });
    }
    if (ev.error) append(box, [h("div", { class: "muted" }, "error"), h("pre", { class: "payload payload-error" }, json(ev.error))]);
    if (!fields.length && !ev.error) box.appendChild(h("p", { class: "muted" }, "no payload"));
  }

  // --- answer --------------------------------------------------------------------------------

  function lineClass(line, i) {
    if (i < 2 && (line.startsWith("--- ") || line.startsWith("+++ "))) return "line-file";
    if (line.startsWith("@@")) return "line-hunk";
    if (line.startsWith("+")) return "line-add";
    if (line.startsWith("-")) return "line-del";
    return "line-ctx";
  }

  function answerText(text, letter, status) {
    if (text === null || text === undefined) {
      return h("p", { class: "muted" }, `${letter.toUpperCase()} has no answer (${status}).`);
    }
    return h("pre", { class: "answer-text", id: `answer-${letter}` }, String(text));
  }

  function answer(d) {
    const ans = d.answer;
    const box = h("section", { id: "answer-diff", class: ans.equal ? "equal" : "differs" });
    const statuses = h("p", { id: "answer-statuses" },
      "A ", badge(ans.status_a || "unknown"), " · B ", badge(ans.status_b || "unknown"),
      ans.status_a !== ans.status_b ? h("span", { class: "problems" }, " — the final status differs") : null);
    box.appendChild(statuses);
    for (const letter of ["a", "b"]) {
      if (ans[letter] === null || ans[letter] === undefined) {
        box.appendChild(h("p", { class: "no-answer", id: `answer-none-${letter}` },
          `${letter.toUpperCase()} has no answer (run ${ans[`status_${letter}`]}).`));
      }
    }
    if (ans.equal) {
      box.appendChild(h("p", { id: "answer-equal" }, "The answers are the same."));
      if (ans.a !== null && ans.a !== undefined) box.appendChild(h("pre", { class: "answer-text" }, String(ans.a)));
      return box;
    }
    const lines = ans.diff || [];
    if (lines.length) {
      const udiff = h("div", { class: "udiff", id: "answer-udiff" });
      lines.forEach((line, i) => {
        udiff.appendChild(h("div", { class: `line ${lineClass(String(line), i)}` }, String(line) || " "));
      });
      box.appendChild(udiff);
    } else if (ans.a === ans.b) {
      box.appendChild(h("p", { class: "muted" }, "Same answer text; only the final status differs."));
    }
    box.appendChild(h("details", { class: "answers-full" },
      h("summary", {}, "both answers in full"),
      h("div", { class: "diff-two" },
        h("div", {}, h("div", { class: "detail-head" }, "A"), answerText(ans.a, "a", ans.status_a)),
        h("div", {}, h("div", { class: "detail-head" }, "B"), answerText(ans.b, "b", ans.status_b)))));
    return box;
  }

  // --- evidence ------------------------------------------------------------------------------

  function anchorItem(anchor, extra) {
    const key = `${anchor.doc_id}#${typeof anchor.location === "string" ? anchor.location : json(anchor.location)}`;
    const title = anchor.doc_title || anchor.title;
    return h("li", { class: "anchor-diff", dataset: { anchor: key } },
      h("code", { class: "anchor-key" }, key),
      title ? h("span", { class: "anchor-title" }, ` — ${title}`) : null,
      typeof anchor.relevance_score === "number"
        ? h("span", { class: "muted" }, ` (relevance ${num(anchor.relevance_score)})`) : null,
      extra || null,
      anchor.snippet !== null && anchor.snippet !== undefined
        ? h("div", { class: "snippet" }, String(anchor.snippet)) : null);
  }

  function hashText(value) {
    return value === null || value === undefined ? "(none)" : String(value).slice(0, 19) + "…";
  }

  function evidence(d) {
    const ev = d.evidence || {};
    const box = h("section", { id: "evidence-diff" });
    const added = ev.added || [], removed = ev.removed || [], changed = ev.changed || [];
    if (!added.length && !removed.length && !changed.length) {
      box.appendChild(h("p", { class: "muted", id: "evidence-same" }, "Both runs cite the same evidence anchors."));
      return box;
    }
    const group = (id, title, items, render) => {
      if (!items.length) return null;
      return h("div", { class: `evidence-group ${id}`, id },
        h("h3", {}, `${title} (${items.length})`),
        h("ul", {}, items.map(render)));
    };
    append(box, [
      group("evidence-added", "Added — in B only", added, (a) => anchorItem(a)),
      group("evidence-removed", "Removed — in A only", removed, (a) => anchorItem(a)),
      group("evidence-changed", "Content changed", changed, (c) => anchorItem(c,
        h("div", { class: "hash-change" }, "content hash ",
          h("code", { class: "hash-a", title: String(c.a) }, hashText(c.a)), " → ",
          h("code", { class: "hash-b", title: String(c.b) }, hashText(c.b))))),
    ]);
    return box;
  }

  // --- metrics and manifest ------------------------------------------------------------------

  function metrics(d) {
    const rows = d.metrics || [];
    if (!rows.length) return h("p", { class: "muted", id: "metrics-diff" }, "No usage recorded.");
    const body = h("tbody");
    for (const m of rows) {
      const delta = typeof m.delta === "number" ? m.delta : 0;
      body.appendChild(h("tr", { class: delta ? "changed" : "unchanged", dataset: { name: m.name } },
        h("td", {}, h("code", {}, String(m.name))),
        h("td", { class: "num" }, num(m.a)),
        h("td", { class: "num" }, num(m.b)),
        h("td", { class: `num delta ${delta > 0 ? "up" : delta < 0 ? "down" : ""}` },
          delta > 0 ? `+${num(delta)}` : num(delta))));
    }
    return h("table", { class: "diff-small", id: "metrics-diff" },
      h("thead", {}, h("tr", {}, h("th", {}, "Metric"), h("th", {}, "A"), h("th", {}, "B"), h("th", {}, "Δ (B − A)"))),
      body);
  }

  function manifest(d) {
    const fields = d.manifest || [];
    const box = h("section", { id: "manifest-diff" });
    if (!fields.length) {
      box.appendChild(h("p", { class: "muted" }, "The manifests match (ids, times and usage aside)."));
      return box;
    }
    const table = fieldTable(fields, "manifest-fields");
    table.classList.add("diff-small");
    box.appendChild(table);
    if (d.manifest_omitted) box.appendChild(h("p", { class: "muted" }, `… and ${d.manifest_omitted} more`));
    return box;
  }

  return { page };
})();
