// RAR viewer: one run — summary, timeline, answer, evidence chain, replay player, panels.
"use strict";

// --- run page --------------------------------------------------------------------------------

function fmt(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : String(n ?? "");
}

function duration(stats, manifest) {
  let us = stats.wall_time_us;
  if (typeof us !== "number" && manifest.created_at && manifest.finished_at) {
    us = (Date.parse(manifest.finished_at) - Date.parse(manifest.created_at)) * 1000;
  }
  if (typeof us !== "number" || Number.isNaN(us)) return "—";
  const s = us / 1e6;
  if (s < 1) return `${(us / 1000).toFixed(0)} ms`;
  if (s < 120) return `${s.toFixed(2)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

function tokens(llm) {
  if (llm.input_tokens === undefined && llm.output_tokens === undefined) return "—";
  let text = `${fmt(llm.input_tokens || 0)} in · ${fmt(llm.output_tokens || 0)} out`;
  if (llm.reasoning_tokens) text += ` · ${fmt(llm.reasoning_tokens)} reasoning`;
  if (llm.cached_input_tokens) text += ` · ${fmt(llm.cached_input_tokens)} cached`;
  return text;
}

function cost(llm) {
  if (llm.cost === undefined || llm.cost === null) return "—";
  if (!llm.cost) return llm.calls ? "0 (no price in the model profile, or a free model)" : "0";
  return `$${Number(llm.cost).toFixed(4)}`;
}

function replayBadge(status) {
  const kind = status === "reproducible" ? "ok" : status === "non-reproducible" ? "bad" : "unchecked";
  return badge(status || "unknown", kind);
}

// This run's own replay report (it is a replay), or what the page learns about its replays.
function replayText(report, parent) {
  if (!report) return h("span", { class: "muted" }, OFFLINE ? "not a replay" : "…");
  const bits = [replayBadge(report.replay_status), " "];
  bits.push(`${report.mode || "replay"} replay${parent ? " of " : ""}`);
  if (parent) bits.push(OFFLINE ? parent : runLink(parent));
  bits.push(`: ${fmt(report.served)} served, ${fmt(report.live)} live, ${fmt(report.mismatched)} mismatched`);
  if (report.result_equal === false) bits.push(", the result differs");
  if (report.first_divergence) {
    const f = report.first_divergence;
    bits.push(`; first divergence at ${f.span} #${f.ordinal} (${f.kind}): ${f.reason}`);
  }
  return h("span", {}, bits);
}

function replaysText(children, id) {
  const replays = (children || []).filter((c) => c.replay);
  if (!replays.length) {
    return h("span", { class: "muted" }, `not replayed yet: rar replay ${id}`);
  }
  const last = replays[0];
  return h("span", {},
    replayBadge(last.replay.replay_status),
    ` latest of ${replays.length} replay${replays.length > 1 ? "s" : ""}: `, runLink(last.id),
    ` (${last.replay.mode || ""}, ${fmt(last.replay.served)} served, ${fmt(last.replay.mismatched)} mismatched)`);
}

function flatStats(stats, prefix = "", out = []) {
  for (const [k, v] of Object.entries(stats || {})) {
    if (v && typeof v === "object" && !Array.isArray(v)) flatStats(v, `${prefix}${k}.`, out);
    else out.push([`${prefix}${k}`, v]);
  }
  return out;
}

// The summary of a run (filled again when a run followed live finishes).
function fillSummary(summary, detail) {
  const id = detail.id;
  const manifest = detail.manifest || {};
  const config = manifest.config || {};
  const stats = detail.summary.stats || {};
  const verify = detail.verify || {};
  const verifyBadge = verify.ok === true ? badge("verified", "ok")
    : verify.ok === false ? badge("verify failed", "bad") : badge("not verified", "unchecked");
  const llm = stats.llm || {};
  const effects = stats.effects || {};
  const replayBox = h("span", { id: "run-replay" }, replayText(detail.replay, detail.summary.parent));
  const rows = [
    ["Goal", h("span", { id: "run-goal" }, manifest.goal ?? "")],
    ["Status", h("span", { id: "run-status" }, badge(detail.status || "unknown"))],
    ["Verify", verifyBadge],
    ["Replay", replayBox],
    ["Run", id],
    ["Created", manifest.created_at || ""],
    ["Finished", manifest.finished_at || ""],
    ["Duration", h("span", { id: "run-duration" }, duration(stats, manifest))],
    ["Mode", config.mode ?? ""],
    ["Model", config.model ?? ((manifest.models || [])[0] || {}).model ?? ""],
    ["Seed", config.seed ?? ""],
    ["Tokens", h("span", { id: "run-tokens" }, tokens(llm))],
    ["Cost", h("span", { id: "run-cost" }, cost(llm))],
    ["Model calls", llm.calls !== undefined ? `${fmt(llm.calls)}` + (llm.cached_calls ? ` (${fmt(llm.cached_calls)} from the cache)` : "") : "—"],
    ["Effects", Object.keys(effects).length ? Object.entries(effects).map(([k, v]) => `${fmt(v)} ${k}`).join(" · ") : "—"],
    ["Events", fmt(detail.summary.events)],
    ["Parent", detail.summary.parent && !OFFLINE ? [runLink(detail.summary.parent), " · ",
      h("a", { id: "compare-parent", href: `/diff?${new URLSearchParams({ a: detail.summary.parent, b: id })}` }, "compare with parent")]
      : detail.summary.parent || "—"],
  ];
  clear(summary);
  for (const [k, v] of rows) append(summary, [h("dt", {}, k), h("dd", {}, v)]);
  const allStats = flatStats(stats);
  if (allStats.length) {
    const table = h("dl", { class: "summary stats" });
    for (const [k, v] of allStats) append(table, [h("dt", {}, k), h("dd", {}, json(v))]);
    append(summary, [h("dt", {}, "Statistics"), h("dd", {}, h("details", { id: "all-stats" }, h("summary", {}, `all ${allStats.length} figures`), table))]);
  }
  if (!detail.replay && !OFFLINE) {
    api(`/api/runs/${encodeURIComponent(id)}/replays`)
      .then((answer) => { clear(replayBox); append(replayBox, [replaysText(answer.children, id)]); })
      .catch(() => {});
  }
}

async function runPage(root, runId) {
  document.title = `Run ${runId} · RAR viewer`;
  clear(root);
  let detail;
  try {
    detail = await api(`/api/runs/${encodeURIComponent(runId)}`);
  } catch (err) {
    append(root, [h("p", {}, h("a", { href: "/" }, "← all runs"))]);
    showError(root, err);
    return;
  }
  const id = detail.id;
  const verify = detail.verify || {};
  const summary = h("dl", { class: "summary", id: "summary" });
  fillSummary(summary, detail);

  const live = detail.status === "running" && !OFFLINE;
  const liveBox = h("div", { id: "run-live", hidden: !live },
    badge("running", "running"), " this run is being written; new events appear in the timeline as they are recorded");
  const actionsBox = h("div", { id: "run-actions", class: "run-actions", hidden: true });
  const sections = [h("p", {}, h("a", { href: "/" }, "← all runs")), h("h1", {}, `Run ${id}`), actionsBox, liveBox];
  let progress = null;
  let initialStarted = null;  // resolves to the first load of the answer, evidence and panels
  const initialLoad = new Promise((resolve) => { initialStarted = resolve; });
  if (live) {  // the agents' progress as it is recorded, then the answer once the run finishes
    progress = liveProgress(id, (ev) => {
      announceFinished(liveBox, ev);
      refreshFinished().catch((err) => showError(answerBox, err));
    });
    sections.push(progress.box);
  }
  sections.push(summary);
  if (verify.ok === false || (verify.problems || []).length || (verify.notes || []).length) {
    const list = h("ul", { class: "problems", id: "verify-problems" });
    for (const p of verify.problems || []) list.appendChild(h("li", {}, `${p.what || "problem"}: ${p.detail || json(p)}`));
    for (const n of verify.notes || []) list.appendChild(h("li", { class: "muted" }, String(n)));
    sections.push(h("h2", { id: "sec-verification" }, "Verification"), list);
  }
  const answerBox = h("div", { id: "answer" });
  const evidenceBox = h("div", { id: "evidence" }, h("p", { class: "muted" }, "Loading the evidence chain…"));
  const playerBox = h("div", { id: "player", class: "player" }, h("p", { class: "muted" }, "Loading…"));
  const timeline = h("div", { class: "timeline", id: "timeline" });
  const more = h("button", { id: "load-more", type: "button" }, "Load more events");
  const timelineInfo = h("p", { class: "muted", id: "timeline-info" });
  const typeFilter = h("select", { id: "timeline-type", "aria-label": "event type" },
    h("option", { value: "" }, `every event (${fmt(detail.summary.events)})`),
    Object.entries(detail.summary.event_types || {}).sort()
      .map(([t, n]) => h("option", { value: t }, `${t} (${fmt(n)})`)));
  const agentFilter = h("select", { id: "timeline-agent", "aria-label": "agent" },
    h("option", { value: "" }, "every agent"),
    (detail.summary.agents || []).map((a) => h("option", { value: a }, a)));
  const timelineControls = h("div", { class: "controls", id: "timeline-controls" }, typeFilter, agentFilter);
  const panelsBox = h("div", { id: "panels" });
  const nav = h("nav", { class: "run-nav", id: "run-nav", "aria-label": "sections of this run" },
    navLink("summary", "Summary"),
    verify.ok === false || (verify.problems || []).length || (verify.notes || []).length
      ? navLink("sec-verification", "Verification") : null,
    navLink("sec-answer", "Answer"), navLink("sec-evidence", "Evidence"),
    h("span", { id: "run-nav-panels" }),
    navLink("sec-replay", "Replay"), navLink("sec-timeline", "Timeline"));
  sections.splice(2, 0, nav);
  if (live) nav.insertBefore(navLink("sec-progress", "Progress"), nav.firstChild.nextSibling);
  sections.push(h("h2", { id: "sec-answer" }, "Answer"), answerBox,
    h("h2", { id: "sec-evidence" }, "Evidence chain"), evidenceBox, panelsBox,
    h("h2", { id: "sec-replay" }, "Replay"), playerBox,
    h("h2", { id: "sec-timeline" }, "Timeline"), timelineControls, timelineInfo, timeline, more);
  append(root, sections);
  if (CONTROLS.runActions && !OFFLINE) CONTROLS.runActions(actionsBox, detail);

  // the run finished while the page followed it: its status, figures, answer, evidence, panels
  async function refreshFinished() {
    try { await initialLoad; } catch (err) { /* shown where it happened */ }
    const fresh = await api(`/api/runs/${encodeURIComponent(id)}`);
    fillSummary(summary, fresh);
    clear(panelsBox);
    delete panelsBox.dataset.ready;
    const navPanels = document.getElementById("run-nav-panels");
    if (navPanels) clear(navPanels);
    const ctx = await loadChain(id, fresh, answerBox, evidenceBox, playerBox);
    await renderPanels(ctx, panelsBox);
    if (CONTROLS.runActions) CONTROLS.runActions(actionsBox, fresh);
  }

  const state = { id, collapsed: new Set(), next: 0, loading: false, query: "", generation: 0 };
  const refilter = () => {
    const q = new URLSearchParams();
    if (typeFilter.value) q.set("type", typeFilter.value);
    if (agentFilter.value) q.set("agent", agentFilter.value);
    state.query = q.toString();
    state.generation += 1;
    state.next = 0;
    state.loading = false;
    clear(timeline);
    loadTimeline(state, timeline, more, timelineInfo);
  };
  typeFilter.addEventListener("change", refilter);
  agentFilter.addEventListener("change", refilter);
  document.addEventListener("rar:goto", async (e) => {
    const seq = Number(e.detail && e.detail.seq);
    if (!Number.isInteger(seq)) return;
    if (typeFilter.value || agentFilter.value) {  // show every event, so the one asked for is there
      typeFilter.value = "";
      agentFilter.value = "";
      refilter();
    }
    // a span asked for too (the Flow panel's nodes): load up to its last event, mark its rows
    const span = e.detail && typeof e.detail.span === "string" ? e.detail.span : null;
    const last = span && Number.isInteger(e.detail.last) ? e.detail.last : seq;
    const find = (at = seq) => timeline.querySelector(`.ev[data-seq="${at}"]`);
    while (!(find() && find(last)) && state.next !== null) {
      if (state.loading) await new Promise((r) => setTimeout(r, 20));
      else await loadTimeline(state, timeline, more, timelineInfo);
    }
    const row = find();
    if (!row) return;
    for (const span of [...state.collapsed]) {  // open every collapsed span around it
      const s = row.dataset.span;
      if (s === span || s.startsWith(`${span}/`)) state.collapsed.delete(span);
    }
    for (const t of timeline.querySelectorAll(".ev[data-type='span.start'] button.toggle")) {
      t.textContent = state.collapsed.has(t.closest(".ev").dataset.span) ? "▸" : "▾";
    }
    applyCollapse(state, timeline);
    for (const old of timeline.querySelectorAll(".ev.target")) old.classList.remove("target");
    for (const old of timeline.querySelectorAll(".ev.in-span")) old.classList.remove("in-span");
    if (span) {
      for (const r of timeline.children) {
        const s = r.dataset.span;
        if (s === span || s.startsWith(`${span}/`)) r.classList.add("in-span");
      }
    }
    row.classList.add("target");
    row.scrollIntoView({ block: "center" });
  });
  await loadTimeline(state, timeline, more, timelineInfo);
  more.addEventListener("click", () => loadTimeline(state, timeline, more, timelineInfo));
  if (live) follow(state, timeline, timelineInfo, liveBox);
  if ("IntersectionObserver" in window) {
    new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) loadTimeline(state, timeline, more, timelineInfo);
    }).observe(more);
  }
  const first = loadChain(id, detail, answerBox, evidenceBox, playerBox)
    .then((ctx) => renderPanels(ctx, panelsBox));
  initialStarted(first);
  first.catch((err) => showError(evidenceBox, err));
}

async function loadTimeline(state, timeline, more, info) {
  if (state.loading || state.next === null) return;
  state.loading = true;
  const generation = state.generation;
  try {
    const filters = state.query ? `&${state.query}` : "";
    const page = await api(`/api/runs/${encodeURIComponent(state.id)}/events?offset=${state.next}&limit=${PAGE}${filters}`);
    if (generation !== state.generation) return;  // the filters changed meanwhile
    for (const ev of page.events) timeline.appendChild(eventRow(state, ev));
    state.next = page.next_offset;
    state.loaded = page.offset + page.events.length;
    const shown = timeline.children.length;
    const of = state.query && page.all !== undefined ? ` (filtered from ${fmt(page.all)})` : "";
    info.textContent = `${shown} of ${page.total} events${of}` + (page.complete ? "" : " (the log is damaged after these)");
    more.hidden = page.next_offset === null;
    applyCollapse(state, timeline);
  } catch (err) {
    showError(info, err);
  } finally {
    if (generation === state.generation) state.loading = false;
  }
}

// A run still being written: poll for the events recorded since, while the whole timeline is
// shown unfiltered; stop when the run finishes (or its writer is gone) and say so.
const FOLLOW_MS = 1500;

function follow(state, timeline, info, liveBox) {
  const timer = setInterval(async () => {
    if (state.loading || state.query || state.next !== null) return;  // the reader is paging or filtering
    try {
      const page = await api(`/api/runs/${encodeURIComponent(state.id)}/events?offset=${state.loaded || 0}&limit=1000`);
      if (state.loading || state.query || state.next !== null) return;
      for (const ev of page.events) timeline.appendChild(eventRow(state, ev));
      state.loaded = page.offset + page.events.length;
      state.next = page.next_offset;
      info.textContent = `${timeline.children.length} of ${page.total} events`;
      applyCollapse(state, timeline);
      const finished = page.events.find((ev) => ev.type === "run.finished");
      if (finished) {
        clearInterval(timer);
        announceFinished(liveBox, finished);
      }
    } catch (err) {
      clearInterval(timer);
      append(clear(liveBox), [badge("stopped following", "unchecked"), ` ${err.message || err}`]);
    }
  }, FOLLOW_MS);
}

// Say once that the followed run finished (the timeline's poller or the progress's may see it
// first); the answer and evidence are loaded in place, and the link reloads the whole page.
function announceFinished(liveBox, finished) {
  if (liveBox.dataset.finished) return;
  liveBox.dataset.finished = "1";
  const reload = h("a", { href: location.pathname, id: "run-live-reload" }, "reload the page");
  append(clear(liveBox), [badge(finished.status || "finished"),
    " the run finished while you watched: its answer and evidence are shown below (",
    reload, " to see everything afresh)"]);
}

function depthOf(span) {
  return String(span || "run").split("/").length - 1;
}

function eventLine(ev) {
  switch (ev.type) {
    case "effect": {
      const req = ev.request && ev.request.value;
      const name = req && typeof req === "object" && req.name ? ` ${req.name}` : "";
      return `${ev.kind}${name} #${ev.ordinal}` + (ev.error ? ` ✗ ${ev.error.type}: ${ev.error.message}` : "") +
        (ev.duration_us !== undefined ? `  ${ev.duration_us} µs` : "");
    }
    case "message":
      return `${ev.performative}  ${ev.sender} → ${(ev.receivers || []).join(", ")}`;
    case "span.start":
      return `${ev.name}` + (ev.attributes ? ` ${JSON.stringify(ev.attributes)}` : "");
    case "span.end":
      return `${ev.status}` + (ev.error ? ` ${ev.error.type}: ${ev.error.message}` : "") + `  ${ev.duration_us ?? ""} µs`;
    case "bdi.update":
      return `${ev.component} ${ev.op} ${ev.key}`;
    case "run.finished":
      return `${ev.status}, ${ev.effects} effects` + (ev.error ? ` ✗ ${ev.error.type}: ${ev.error.message}` : "");
    case "snapshot":
      return `${ev.phase}: ${ev.files} files, ${ev.bytes} bytes`;
    case "artifact":
      return `${ev.name} (${ev.size} bytes, ${ev.media_type})`;
    case "note":
      return `${ev.level}: ${ev.text}`;
    case "error":
      return `${ev.fatal ? "fatal " : ""}${ev.error && ev.error.type}: ${ev.error && ev.error.message}`;
    case "checkpoint":
      return String(ev.reason || "");
    case "flow.step": {
      const split = Array.isArray(ev.split) && ev.split.length === 2 ? ` ${ev.split[0]}/${ev.split[1]}` : "";
      const symbols = Array.isArray(ev.symbols) ? `  ${ev.symbols.join(", ")}` : "";
      return `${ev.flow ?? "?"}: ${ev.agent ?? "?"}${split} ${ev.status ?? ""}${symbols}` +
        (ev.error ? ` ✗ ${ev.error.type}: ${ev.error.message}` : "");
    }
    case "flow.merge":
      return `${ev.flow ?? "?"}: ${ev.agent ?? "?"} ${ev.inputs ?? "?"}↣${ev.outputs ?? "?"}` + (ev.errored ? `, ${ev.errored} errored` : "");
    case "flow.end":
      return `${ev.flow ?? "?"}: ${ev.contexts ?? "?"} contexts, ${ev.errored ?? 0} errored`;
    default:
      return "";
  }
}

function eventRow(state, ev) {
  const depth = depthOf(ev.span);
  const row = h("div", {
    class: `ev t-${String(ev.type).replace(/[^a-z]/gi, "-")}`,
    dataset: { seq: ev.seq, span: ev.span || "run", type: ev.type, kind: ev.kind || "" },
  });
  row.style.paddingLeft = `${6 + depth * 18}px`;
  const head = h("div", { class: "head" });
  if (ev.type === "span.start") {
    const toggle = h("button", { type: "button", class: "toggle", title: "collapse / expand the span" }, "▾");
    toggle.addEventListener("click", () => {
      const span = ev.span || "run";
      if (state.collapsed.has(span)) { state.collapsed.delete(span); toggle.textContent = "▾"; }
      else { state.collapsed.add(span); toggle.textContent = "▸"; }
      applyCollapse(state, row.parentNode);
    });
    head.appendChild(toggle);
  }
  append(head, [
    h("span", { class: "seq" }, `#${ev.seq}`),
    h("span", { class: "type" }, ev.type),
    h("span", { class: "line" }, eventLine(ev)),
    ev.agent ? h("span", { class: "span" }, `[${ev.agent}]`) : null,
    h("span", { class: "span" }, ev.span || ""),
  ]);
  if (CONTROLS.eventRow && !OFFLINE) CONTROLS.eventRow(head, ev, state.id);
  const fields = Object.keys(ev).filter((k) => isPayloadRef(ev[k]));
  if (fields.length) {
    const detail = h("div", { class: "detail", hidden: true });
    const btn = h("button", { type: "button", class: "expand" }, "details");
    let loaded = false;
    btn.addEventListener("click", async () => {
      detail.hidden = !detail.hidden;
      btn.textContent = detail.hidden ? "details" : "hide";
      if (loaded) return;
      loaded = true;
      for (const field of fields) {
        const pre = h("pre", { class: `payload payload-${field}` }, "loading…");
        append(detail, [h("div", { class: "muted" }, `${field} (${ev[field].digest.slice(0, 19)}…, ${ev[field].size} bytes)`), pre]);
        payloadValue(state.id, ev, field)
          .then((value) => { pre.textContent = json(value); })
          .catch((err) => { pre.textContent = `could not load: ${err.message}`; });
      }
      if (ev.error) append(detail, [h("div", { class: "muted" }, "error"), h("pre", {}, json(ev.error))]);
    });
    append(head, [" ", btn]);
    append(row, [head, detail]);
  } else {
    row.appendChild(head);
  }
  return row;
}

function applyCollapse(state, timeline) {
  if (!timeline) return;
  const spans = [...state.collapsed];
  for (const row of timeline.children) {
    const s = row.dataset.span;
    const hidden = spans.some((c) => s.startsWith(`${c}/`) || (s === c && row.dataset.type !== "span.start"));
    row.classList.toggle("hidden", hidden);
  }
}

// --- evidence chain and replay player ----------------------------------------------------------

async function allEvents(id) {
  const events = [];
  let offset = 0;
  while (offset !== null) {
    const page = await api(`/api/runs/${encodeURIComponent(id)}/events?offset=${offset}&limit=1000`);
    events.push(...page.events);
    offset = page.next_offset;
  }
  return events;
}

async function loadChain(id, detail, answerBox, evidenceBox, playerBox) {
  const events = await allEvents(id);
  const finished = events.filter((e) => e.type === "run.finished").pop();
  let result = null;
  if (finished && finished.result) result = await payloadValue(id, finished, "result");

  clear(answerBox);
  if (result && typeof result === "object" && typeof result.answer === "string") {
    answerBox.appendChild(h("div", { class: "answer markdown", id: "answer-text" }, renderMarkdown(result.answer)));
    answerBox.appendChild(h("details", { class: "source" }, h("summary", {}, "as recorded (Markdown source)"),
      h("pre", { id: "answer-source" }, result.answer)));
  } else if (result && typeof result === "object" && "answer" in result) {
    answerBox.appendChild(h("div", { class: "answer", id: "answer-text" }, json(result.answer)));
  } else if (result !== null) {
    answerBox.appendChild(h("pre", { id: "answer-text" }, json(result)));
  } else {
    answerBox.appendChild(h("p", { class: "muted" }, finished ? "The run finished without a result." : "The run has not finished."));
  }
  if (finished && finished.error) answerBox.appendChild(h("pre", { class: "problems" }, json(finished.error)));

  // anchors seen in evidence events (doc_id#location → anchor)
  const present = new Map();
  for (const ev of events.filter((e) => e.type === "evidence" && e.anchors)) {
    let anchors;
    try { anchors = await payloadValue(id, ev, "anchors"); } catch (err) { continue; }
    for (const a of Array.isArray(anchors) ? anchors : []) {
      if (a && a.doc_id !== undefined) present.set(`${a.doc_id}#${a.location}`, { anchor: a, seq: ev.seq });
    }
  }
  const fromResult = new Map();
  for (const a of (result && Array.isArray(result.anchors)) ? result.anchors : []) {
    if (a && a.doc_id !== undefined) fromResult.set(`${a.doc_id}#${a.location}`, a);
  }
  clear(evidenceBox);
  const claims = result && Array.isArray(result.claims) ? result.claims : [];
  if (!claims.length) {
    evidenceBox.appendChild(h("p", { class: "muted" }, "The final answer makes no claims with anchors."));
  }
  claims.forEach((claim, i) => {
    const box = h("div", { class: "claim", dataset: { index: i } },
      h("div", { class: "text" }, `Claim ${i + 1}: `, String(claim && claim.text !== undefined ? claim.text : json(claim))));
    for (const ref of (claim && claim.anchors) || []) {
      const key = String(ref);
      const found = present.get(key);
      const anchor = (found && found.anchor) || fromResult.get(key);
      const el = h("div", { class: "anchor", dataset: { anchor: key } },
        found ? badge("in evidence", "present") : badge("not in evidence", "missing"), " ",
        hashBadge(detail.anchors, key), " ",
        h("a", { href: "#", class: "anchor-link" }, key),
        anchor && anchor.doc_title ? h("span", { class: "muted" }, ` — ${anchor.doc_title}`) : null,
        found ? h("span", { class: "muted" }, " (", eventLink(found.seq, `event #${found.seq}`), ")") : null);
      const entry = detail.anchors && detail.anchors.anchors ? detail.anchors.anchors[key] : null;
      const snippet = h("div", { class: "snippet", hidden: true },
        anchor ? String(anchor.snippet ?? "(no snippet recorded)") : "(this anchor is not in the record)",
        anchor && anchor.content_hash ? h("div", { class: "muted hash" }, `content hash ${anchor.content_hash}`) : null,
        entry && entry.message ? h("div", { class: "problems" }, String(entry.message)) : null);
      el.querySelector("a").addEventListener("click", (e) => { e.preventDefault(); snippet.hidden = !snippet.hidden; });
      el.appendChild(snippet);
      box.appendChild(el);
    }
    evidenceBox.appendChild(box);
  });

  buildPlayer(id, events, result, playerBox);
  return { id, detail, events, result, payload: (ev, field) => payloadValue(id, ev, field) };
}

// Does the cited passage still match its content hash in the corpus (checked when the page
// was served, or when the page was exported)?
function hashBadge(check, key) {
  const entry = check && check.anchors ? check.anchors[key] : null;
  if (!entry) return badge("hash not checked", "unchecked");
  let el;
  if (entry.status === "matches") el = badge("passage matches its hash", "ok");
  else if (entry.status === "unchecked") el = badge("hash not checked", "unchecked");
  else {
    const words = { passage_changed: "passage changed", passage_missing: "passage gone",
      document_missing: "document gone", snippet_mismatch: "snippet differs" };
    el = badge(words[entry.status] || String(entry.status).replace(/_/g, " "), "bad");
  }
  el.classList.add("hash-badge");
  el.dataset.status = entry.status;
  if (entry.message) el.title = String(entry.message);
  return el;
}

function navLink(target, label) {
  const link = h("a", { href: `#${target}`, dataset: { target } }, label);
  link.addEventListener("click", (e) => {
    const el = document.getElementById(target);
    if (!el) return;
    e.preventDefault();
    el.scrollIntoView({ block: "start" });
  });
  return link;
}

async function renderPanels(ctx, container) {
  const nav = document.getElementById("run-nav-panels");
  for (const panel of PANELS) {
    const box = h("div", { id: `panel-${panel.id}`, class: "panel" });
    const section = h("section", { class: "panel-section", dataset: { panel: panel.id } },
      h("h2", { id: `sec-${panel.id}` }, panel.title), box);
    container.appendChild(section);
    try {
      if ((await panel.render(ctx, box)) === false) section.remove();
      else if (nav) nav.appendChild(navLink(`sec-${panel.id}`, panel.title));
    } catch (err) {
      showError(box, err);
    }
  }
  container.dataset.ready = "1";
}

// A tool call's arguments on one line (a JSON string is parsed first).
function argsText(args) {
  let value = args;
  if (typeof args === "string") {
    try { value = JSON.parse(args); } catch (err) { return args; }
  }
  return value === undefined ? "" : JSON.stringify(value);
}

// What a step says, the way a reader follows a ReAct loop, then the recorded JSON folded away.
function stepView(step, value) {
  const parts = [];
  if (step.kind === "thought" && value && typeof value === "object" && value.response) {
    const r = value.response;
    if (r.reasoning) parts.push(h("div", { class: "step-reasoning" }, h("span", { class: "muted" }, "reasoning: "), String(r.reasoning)));
    if (r.content) parts.push(h("div", { class: "step-text" }, typeof r.content === "string" ? r.content : json(r.content)));
    for (const call of r.tool_calls || []) {
      parts.push(h("div", { class: "step-call" }, "→ ", h("strong", {}, String(call.name)), `(${argsText(call.arguments)})`));
    }
    if (!parts.length) parts.push(h("div", { class: "muted" }, "(the model said nothing)"));
  } else if (step.kind === "action" && value && typeof value === "object" && value.name !== undefined) {
    parts.push(h("div", { class: "step-call" }, h("strong", {}, String(value.name)), `(${argsText(value.args)})`));
  } else if (step.kind === "observation") {
    if (typeof value === "string") parts.push(h("div", { class: "step-text" }, value));
    else if (value && typeof value === "object" && "content" in value) {
      parts.push(h("div", { class: "step-text" }, typeof value.content === "string" ? value.content : json(value.content)));
    }
  } else if (step.kind === "message" && step.ev) {
    parts.push(h("div", { class: "step-call" }, h("strong", {}, String(step.ev.performative)),
      ` ${step.ev.sender} → ${(step.ev.receivers || []).join(", ")}`));
    const inner = value && typeof value === "object" && "content" in value ? value.content : value;
    parts.push(h("pre", { class: "step-raw" }, json(inner)));
    return parts;
  } else if (step.kind === "answer" && typeof value === "string") {
    parts.push(renderMarkdown(value));
  }
  const raw = h("pre", { class: "step-raw" }, json(value));
  if (!parts.length) return [raw];
  return [...parts, h("details", { class: "step-json" }, h("summary", {}, "as recorded (JSON)"), raw)];
}

function buildPlayer(id, events, result, box) {
  const steps = [];
  for (const ev of events) {
    if (ev.type === "effect" && ev.kind === "llm") steps.push({ kind: "thought", ev, field: "result" });
    else if (ev.type === "effect" && ev.kind === "tool") {
      steps.push({ kind: "action", ev, field: "request" });
      steps.push({ kind: "observation", ev, field: ev.result ? "result" : null });
    } else if (ev.type === "message") steps.push({ kind: "message", ev, field: "content" });
  }
  if (result !== null && result !== undefined) {
    steps.push({ kind: "answer", value: typeof result === "object" && "answer" in result ? result.answer : result });
  }
  clear(box);
  if (!steps.length) { box.appendChild(h("p", { class: "muted" }, "Nothing to replay.")); return; }
  let at = 0;
  let timer = null;
  const prev = h("button", { type: "button", id: "player-prev" }, "← prev");
  const play = h("button", { type: "button", id: "player-play" }, "▶ play");
  const next = h("button", { type: "button", id: "player-next" }, "next →");
  const where = h("span", { class: "muted", id: "player-pos" });
  const kind = h("div", { class: "step-kind", id: "player-kind" });
  const body = h("div", { id: "player-body" });
  const controls = h("div", { class: "controls" }, prev, play, next, where,
    h("span", { class: "muted" }, "(← / → keys)"));
  append(box, [controls, kind, body]);
  if (CONTROLS.playerControls && !OFFLINE) CONTROLS.playerControls(controls, () => steps[at], id, events);

  function show() {
    const step = steps[at];
    where.textContent = `step ${at + 1} of ${steps.length}`;
    clear(kind);
    if (step.ev) {
      append(kind, [`${step.kind} · `, eventLink(step.ev.seq, `event #${step.ev.seq}`), step.ev.span ? ` · ${step.ev.span}` : ""]);
    } else kind.textContent = step.kind;
    const render = (value) => append(clear(body), stepView(step, value));
    if (!step.ev) { render(step.value); return; }
    if (!step.field) { append(clear(body), [h("div", { class: "problems" }, "the tool failed:"), h("pre", {}, json(step.ev.error || null))]); return; }
    body.textContent = "loading…";
    const want = at;
    payloadValue(id, step.ev, step.field)
      .then((v) => { if (want === at) render(v); })
      .catch((err) => { if (want === at) body.textContent = `could not load: ${err.message}`; });
  }
  function go(delta) { at = Math.max(0, Math.min(steps.length - 1, at + delta)); show(); }
  function stop() { if (timer) clearInterval(timer); timer = null; play.textContent = "▶ play"; }
  prev.addEventListener("click", () => { stop(); go(-1); });
  next.addEventListener("click", () => { stop(); go(1); });
  play.addEventListener("click", () => {
    if (timer) { stop(); return; }
    play.textContent = "❚❚ pause";
    timer = setInterval(() => { if (at >= steps.length - 1) stop(); else go(1); }, 1200);
  });
  document.addEventListener("keydown", (e) => {
    if (e.target && ["INPUT", "SELECT", "TEXTAREA"].includes(e.target.tagName)) return;
    if (e.key === "ArrowLeft") { stop(); go(-1); }
    else if (e.key === "ArrowRight") { stop(); go(1); }
  });
  show();
}

