// RAR viewer: a single page over the read-only JSON API.
// Every value that comes from the record is inserted as text (textContent / createTextNode);
// nothing from the record is ever parsed as HTML.

const PAGE = 200;

// --- DOM helpers -----------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "text") el.textContent = String(value);
    else if (key.startsWith("on")) throw new Error("no inline handlers");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

function badge(text, kind) {
  return h("span", { class: `badge ${kind || String(text).replace(/[^a-z_]/gi, "")}` }, String(text));
}

function runLink(id) {
  return h("a", { href: `/runs/${encodeURIComponent(id)}` }, id);
}

function json(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

// Offline data: an exported page (`rar export RUN --format html`) embeds the run, its events and
// the plain value of every payload in <script type="application/json" id="rar-data">; then
// nothing is fetched and api() answers from it.
const OFFLINE = (() => {
  const el = document.getElementById("rar-data");
  return el ? JSON.parse(el.textContent) : null;
})();

function offlineApi(path) {
  const [pathname, query] = path.split("?");
  const url = { pathname, searchParams: new URLSearchParams(query || "") };
  const runPath = `/api/runs/${encodeURIComponent(OFFLINE.run.id)}`;
  if (url.pathname === runPath) return OFFLINE.run;
  if (url.pathname === `${runPath}/events`) {
    const all = OFFLINE.events;
    const offset = Number(url.searchParams.get("offset") || 0);
    const limit = Number(url.searchParams.get("limit") || PAGE);
    const events = all.events.slice(offset, offset + limit);
    const end = offset + events.length;
    return { ...all, offset, limit, events, next_offset: end < all.events.length ? end : null };
  }
  if (url.pathname === "/api/payload") {
    const key = `${url.searchParams.get("seq")}:${url.searchParams.get("field")}`;
    const payloads = OFFLINE.payloads || {};
    if (Object.prototype.hasOwnProperty.call(payloads, key)) return { value: payloads[key] };
    const why = (OFFLINE.payload_errors || {})[key];
    throw new Error(why ? `payload ${key}: ${why}` : `payload ${key} is not in this export`);
  }
  throw new Error(`${path} is not in this export`);
}

async function api(path) {
  if (OFFLINE) return offlineApi(path);
  const answer = await fetch(path, { headers: { Accept: "application/json" } });
  let body = null;
  try {
    body = await answer.json();
  } catch (err) {
    throw new Error(`${path}: HTTP ${answer.status}, not JSON`);
  }
  if (!answer.ok) throw new Error(`${body.error || answer.status}: ${body.message || path}`);
  return body;
}

function isPayloadRef(value) {
  return value && typeof value === "object" && !Array.isArray(value) &&
    typeof value.digest === "string" && value.digest.startsWith("sha256:") && "size" in value;
}

const payloadCache = new Map();

async function payloadValue(runId, event, field) {
  const ref = event[field];
  if (!isPayloadRef(ref)) return ref;
  if ("value" in ref) return ref.value;
  const key = `${event.seq}:${field}`;
  if (!payloadCache.has(key)) {
    const q = new URLSearchParams({ run: runId, seq: String(event.seq), field });
    payloadCache.set(key, api(`/api/payload?${q}`).then((b) => b.value));
  }
  return payloadCache.get(key);
}

function showError(el, err) {
  append(el, [h("div", { class: "error-box" }, String(err && err.message ? err.message : err))]);
}

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

// --- run page --------------------------------------------------------------------------------

function flatStats(stats, prefix = "", out = []) {
  for (const [k, v] of Object.entries(stats || {})) {
    if (v && typeof v === "object" && !Array.isArray(v)) flatStats(v, `${prefix}${k}.`, out);
    else out.push([`${prefix}${k}`, v]);
  }
  return out;
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
  const manifest = detail.manifest || {};
  const config = manifest.config || {};
  const stats = detail.summary.stats || {};
  const verify = detail.verify || {};
  const verifyBadge = verify.ok === true ? badge("verified", "ok")
    : verify.ok === false ? badge("verify failed", "bad") : badge("not verified", "unchecked");

  const summary = h("dl", { class: "summary", id: "summary" });
  const rows = [
    ["Goal", h("span", { id: "run-goal" }, manifest.goal ?? "")],
    ["Status", badge(detail.status || "unknown")],
    ["Verify", verifyBadge],
    ["Run", id],
    ["Created", manifest.created_at || ""],
    ["Finished", manifest.finished_at || ""],
    ["Mode", config.mode ?? ""],
    ["Model", config.model ?? ((manifest.models || [])[0] || {}).model ?? ""],
    ["Seed", config.seed ?? ""],
    ["Events", String(detail.summary.events)],
    ["Parent", detail.summary.parent ? runLink(detail.summary.parent) : "—"],
  ];
  for (const [k, v] of flatStats(stats)) rows.push([k, json(v)]);
  for (const [k, v] of rows) append(summary, [h("dt", {}, k), h("dd", {}, v)]);

  const sections = [h("p", {}, h("a", { href: "/" }, "← all runs")), h("h1", {}, `Run ${id}`), summary];
  if (verify.ok === false || (verify.problems || []).length || (verify.notes || []).length) {
    const list = h("ul", { class: "problems", id: "verify-problems" });
    for (const p of verify.problems || []) list.appendChild(h("li", {}, `${p.what || "problem"}: ${p.detail || json(p)}`));
    for (const n of verify.notes || []) list.appendChild(h("li", { class: "muted" }, String(n)));
    sections.push(h("h2", {}, "Verification"), list);
  }
  const answerBox = h("div", { id: "answer" });
  const evidenceBox = h("div", { id: "evidence" }, h("p", { class: "muted" }, "Loading the evidence chain…"));
  const playerBox = h("div", { id: "player", class: "player" }, h("p", { class: "muted" }, "Loading…"));
  const timeline = h("div", { class: "timeline", id: "timeline" });
  const more = h("button", { id: "load-more", type: "button" }, "Load more events");
  const timelineInfo = h("p", { class: "muted", id: "timeline-info" });
  sections.push(h("h2", {}, "Answer"), answerBox, h("h2", {}, "Evidence chain"), evidenceBox,
    h("h2", {}, "Replay"), playerBox, h("h2", {}, "Timeline"), timelineInfo, timeline, more);
  append(root, sections);

  const state = { id, collapsed: new Set(), next: 0, loading: false };
  await loadTimeline(state, timeline, more, timelineInfo);
  more.addEventListener("click", () => loadTimeline(state, timeline, more, timelineInfo));
  if ("IntersectionObserver" in window) {
    new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) loadTimeline(state, timeline, more, timelineInfo);
    }).observe(more);
  }
  loadChain(id, answerBox, evidenceBox, playerBox).catch((err) => showError(evidenceBox, err));
}

async function loadTimeline(state, timeline, more, info) {
  if (state.loading || state.next === null) return;
  state.loading = true;
  try {
    const page = await api(`/api/runs/${encodeURIComponent(state.id)}/events?offset=${state.next}&limit=${PAGE}`);
    for (const ev of page.events) timeline.appendChild(eventRow(state, ev));
    state.next = page.next_offset;
    const shown = timeline.children.length;
    info.textContent = `${shown} of ${page.total} events` + (page.complete ? "" : " (the log is damaged after these)");
    more.hidden = page.next_offset === null;
    applyCollapse(state, timeline);
  } catch (err) {
    showError(info, err);
  } finally {
    state.loading = false;
  }
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

async function loadChain(id, answerBox, evidenceBox, playerBox) {
  const events = await allEvents(id);
  const finished = events.filter((e) => e.type === "run.finished").pop();
  let result = null;
  if (finished && finished.result) result = await payloadValue(id, finished, "result");

  clear(answerBox);
  if (result && typeof result === "object" && "answer" in result) {
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
        h("a", { href: "#", class: "anchor-link" }, key),
        anchor && anchor.doc_title ? h("span", { class: "muted" }, ` — ${anchor.doc_title}`) : null,
        found ? h("span", { class: "muted" }, ` (event #${found.seq})`) : null);
      const snippet = h("div", { class: "snippet", hidden: true },
        anchor ? String(anchor.snippet ?? "(no snippet recorded)") : "(this anchor is not in the record)");
      el.querySelector("a").addEventListener("click", (e) => { e.preventDefault(); snippet.hidden = !snippet.hidden; });
      el.appendChild(snippet);
      box.appendChild(el);
    }
    evidenceBox.appendChild(box);
  });

  buildPlayer(id, events, result, playerBox);
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
  const body = h("pre", { id: "player-body" });
  append(box, [h("div", { class: "controls" }, prev, play, next, where,
    h("span", { class: "muted" }, "(← / → keys)")), kind, body]);

  function show() {
    const step = steps[at];
    where.textContent = `step ${at + 1} of ${steps.length}`;
    kind.textContent = step.ev ? `${step.kind} · event #${step.ev.seq}${step.ev.span ? " · " + step.ev.span : ""}` : step.kind;
    if (!step.ev) { body.textContent = json(step.value); return; }
    if (!step.field) { body.textContent = json(step.ev.error || null); return; }
    body.textContent = "loading…";
    const want = at;
    payloadValue(id, step.ev, step.field)
      .then((v) => { if (want === at) body.textContent = json(v); })
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

// --- routing ---------------------------------------------------------------------------------

function main() {
  const root = document.getElementById("app");
  const match = OFFLINE ? [null, encodeURIComponent(OFFLINE.run.id)]
    : location.pathname.match(/^\/runs\/([^/]+)\/?$/);
  const page = match ? runPage(root, decodeURIComponent(match[1])) : runsPage(root);
  page.catch((err) => showError(root, err)).finally(() => { document.body.dataset.ready = "1"; });
}

main();
