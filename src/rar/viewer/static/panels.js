// RAR viewer: the run page's agent panels — messages as a sequence diagram with the Contract Net
// rounds, BDI state per agent, the audit, the argumentation graph, and the run's artifacts.
// Like the rest of the viewer, every recorded value is inserted as text (h(), textContent);
// SVG is built element by element with createElementNS, never parsed from a string.
"use strict";

// The SVG namespace is an identifier, not a link. It is assembled here so that the exported
// page (which inlines this file) holds no URL-like string at all.
const SVG_NS = ["http:", "", "www.w3.org", "2000", "svg"].join("/");
const KNOWN_AGENTS = ["planner", "researcher", "executor", "auditor"];
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml"]);
const PAYLOAD_WORKERS = 6;

// --- helpers -----------------------------------------------------------------------------------

function svgEl(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) throw new Error("no inline handlers");
    el.setAttribute(key, String(value));
  }
  if (text !== undefined && text !== null) el.textContent = String(text);
  return el;
}

function svgTitle(text) {
  return svgEl("title", {}, text);
}

function textOf(value) {
  if (value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function shorten(text, max) {
  const line = String(text).replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

// A value shortened to one line; the whole value (pretty JSON) on click.
function expandable(value, max = 100) {
  const full = json(value === undefined ? null : value);
  const short = shorten(textOf(value), max);
  if (short === full && !full.includes("\n")) return h("span", { class: "value" }, full);
  return h("details", { class: "value" },
    h("summary", {}, short || "(empty)"), h("pre", { class: "full" }, full));
}

function num(value, digits = 3) {
  if (typeof value !== "number" || !Number.isFinite(value)) return value === undefined || value === null ? "—" : String(value);
  const scale = 10 ** digits;
  return String(Math.round(value * scale) / scale);
}

function cssToken(text) {
  return String(text || "").replace(/[^A-Za-z0-9_-]/g, "_");
}

// Each event's payload `field`, loaded through ctx.payload a few at a time:
// Map seq → { ok, value } | { ok: false, error }.
async function loadPayloads(ctx, events, field) {
  const out = new Map();
  let next = 0;
  async function worker() {
    while (next < events.length) {
      const ev = events[next++];
      if (ev[field] === undefined) { out.set(ev.seq, { ok: true, value: undefined }); continue; }
      try {
        out.set(ev.seq, { ok: true, value: await ctx.payload(ev, field) });
      } catch (err) {
        out.set(ev.seq, { ok: false, error: err && err.message ? err.message : String(err) });
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(PAYLOAD_WORKERS, events.length) }, worker));
  return out;
}

function loadedValue(entry, fallback = null) {
  return entry && entry.ok ? entry.value : fallback;
}

// A message event's content payload is the envelope {message_id, content, evidence?}.
function envelope(entry) {
  if (!entry) return { body: null, evidence: [], error: "not loaded" };
  if (!entry.ok) return { body: null, evidence: [], error: entry.error };
  const v = entry.value;
  if (v && typeof v === "object" && !Array.isArray(v) && "content" in v && "message_id" in v) {
    return { body: v.content, evidence: Array.isArray(v.evidence) ? v.evidence : [], id: v.message_id };
  }
  return { body: v, evidence: [] };
}

function field(obj, key) {
  return obj && typeof obj === "object" && !Array.isArray(obj) ? obj[key] : undefined;
}

function messageLine(ev) {
  return `${ev.performative} #${ev.seq} · ${ev.sender} → ${(ev.receivers || []).join(", ")}`;
}

// --- 1. agent messages & Contract Net ----------------------------------------------------------

function agentsOf(messages) {
  const seen = new Set();
  for (const ev of messages) {
    if (ev.sender) seen.add(String(ev.sender));
    for (const r of ev.receivers || []) seen.add(String(r));
  }
  const known = KNOWN_AGENTS.filter((a) => seen.has(a));
  return known.concat([...seen].filter((a) => !KNOWN_AGENTS.includes(a)));
}

// Contract Net rounds: the messages of each conversation, with what each one says.
function contractNetRounds(messages, contents) {
  const rounds = new Map();
  for (const ev of messages) {
    if (!ev.conversation_id) continue;
    const key = String(ev.conversation_id);
    if (!rounds.has(key)) rounds.set(key, { id: key, number: rounds.size + 1, messages: [] });
    rounds.get(key).messages.push({ ev, body: envelope(contents.get(ev.seq)).body });
  }
  return [...rounds.values()];
}

function roundTask(round) {
  const cfp = round.messages.find((m) => m.ev.performative === "CFP");
  const description = field(cfp && cfp.body, "description");
  const kind = field(description, "kind");
  let what = "";
  for (const key of ["query", "purpose", "claim", "goal", "draft"]) {
    const v = field(description, key);
    if (v !== undefined && v !== null && v !== "") { what = textOf(v); break; }
  }
  if (!what && description !== undefined) what = textOf(description);
  return { cfp, description, kind: kind === undefined ? "" : String(kind), what };
}

function drawSequence(messages, agents, rounds, onSelect) {
  const GUTTER = 58, COL = 150, ROW = 30, HEAD = 40, RIGHT = 190, TOPPAD = 8;
  const width = GUTTER + COL * agents.length + RIGHT;
  const height = TOPPAD * 2 + ROW * messages.length;
  const xOf = new Map(agents.map((a, i) => [a, GUTTER + COL * i + COL / 2]));
  const rowOf = new Map(messages.map((ev, i) => [ev.seq, i]));
  const yOf = (i) => TOPPAD + i * ROW + ROW / 2 + 6;

  const head = svgEl("svg", { class: "seq-head", width, height: HEAD, viewBox: `0 0 ${width} ${HEAD}`, role: "presentation" });
  head.appendChild(svgEl("rect", { class: "seq-head-bg", x: 0, y: 0, width, height: HEAD }));
  head.appendChild(svgEl("text", { class: "seq-gutter-label", x: 6, y: HEAD / 2 + 4 }, "event"));
  for (const agent of agents) {
    const x = xOf.get(agent);
    const sent = messages.filter((ev) => ev.sender === agent).length;
    const g = svgEl("g", { class: `agent agent-${cssToken(agent)}`, "data-agent": agent });
    g.appendChild(svgEl("rect", { class: "agent-box", x: x - COL / 2 + 10, y: 6, width: COL - 20, height: HEAD - 12, rx: 5 }));
    g.appendChild(svgEl("text", { class: "agent-name", x, y: HEAD / 2 + 4, "text-anchor": "middle" }, shorten(agent, 18)));
    g.appendChild(svgTitle(`${agent}: sent ${sent} message${sent === 1 ? "" : "s"}`));
    head.appendChild(g);
  }
  if (rounds.length) head.appendChild(svgEl("text", { class: "seq-gutter-label", x: GUTTER + COL * agents.length + 12, y: HEAD / 2 + 4 }, "Contract Net round"));

  const body = svgEl("svg", {
    class: "seq-body", width, height, viewBox: `0 0 ${width} ${height}`,
    role: "group", "aria-label": `Sequence diagram of ${messages.length} messages between ${agents.join(", ")}`,
  });
  // Contract Net rounds: a band behind their messages, labelled on the right
  for (const round of rounds) {
    const rows = round.messages.map((m) => rowOf.get(m.ev.seq));
    const first = Math.min(...rows), last = Math.max(...rows);
    const task = roundTask(round);
    const y = TOPPAD + first * ROW + 1;
    const g = svgEl("g", { class: `round-band ${round.number % 2 ? "odd" : "even"}`, "data-conversation": round.id });
    g.appendChild(svgEl("rect", { x: 2, y, width: width - 4, height: (last - first + 1) * ROW - 2, rx: 4 }));
    g.appendChild(svgEl("text", { class: "round-label", x: GUTTER + COL * agents.length + 12, y: y + 16 },
      `round ${round.number}${task.kind ? ` · ${task.kind}` : ""}`));
    g.appendChild(svgTitle(`Contract Net round ${round.number}: ${task.kind} ${shorten(task.what, 160)}`));
    body.appendChild(g);
  }
  for (const agent of agents) {
    const x = xOf.get(agent);
    body.appendChild(svgEl("line", { class: "lifeline", x1: x, y1: 0, x2: x, y2: height }));
  }
  messages.forEach((ev, i) => {
    const y = yOf(i);
    const perf = String(ev.performative || "");
    const g = svgEl("g", {
      class: `msg perf-${cssToken(perf)}`, tabindex: 0, role: "button",
      "data-seq": ev.seq, "data-performative": perf, "data-sender": ev.sender,
      "data-receivers": (ev.receivers || []).join(","), "aria-label": messageLine(ev),
    });
    g.appendChild(svgTitle(messageLine(ev) + (ev.conversation_id ? ` · conversation ${ev.conversation_id}` : "")));
    g.appendChild(svgEl("rect", { class: "msg-hit", x: 0, y: y - ROW / 2 - 6, width, height: ROW }));
    g.appendChild(svgEl("text", { class: "msg-seq", x: 6, y: y + 4 }, `#${ev.seq}`));
    const sx = xOf.get(ev.sender);
    const targets = (ev.receivers || []).map((r) => xOf.get(r)).filter((x) => x !== undefined);
    const others = targets.filter((x) => x !== sx);
    if (sx !== undefined) {
      const left = Math.min(sx, ...others), right = Math.max(sx, ...others);
      if (others.length) g.appendChild(svgEl("line", { class: "msg-line", x1: left, y1: y, x2: right, y2: y }));
      for (const tx of others) {
        const dir = tx > sx ? 1 : -1;
        g.appendChild(svgEl("path", { class: "msg-head", d: `M${tx} ${y} l${-8 * dir} -4.5 l0 9 z` }));
      }
      if (targets.includes(sx)) {  // to itself: a small loop
        g.appendChild(svgEl("path", { class: "msg-self", d: `M${sx} ${y - 6} h26 v12 h-22`, fill: "none" }));
        g.appendChild(svgEl("path", { class: "msg-head", d: `M${sx} ${y + 6} l8 -4.5 l0 9 z` }));
      }
      g.appendChild(svgEl("circle", { class: "msg-from", cx: sx, cy: y, r: 3 }));
      if (others.length) {
        const near = others.reduce((a, b) => (Math.abs(a - sx) <= Math.abs(b - sx) ? a : b));
        g.appendChild(svgEl("text", { class: "msg-label", x: (sx + near) / 2, y: y - 5, "text-anchor": "middle" }, perf));
      } else {
        g.appendChild(svgEl("text", { class: "msg-label", x: sx + 32, y: y + 4 }, perf));
      }
    }
    g.addEventListener("click", () => onSelect(ev, g));
    g.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onSelect(ev, g); }
    });
    body.appendChild(g);
  });
  return { head, body };
}

function renderRound(round, bdiStates) {
  const task = roundTask(round);
  const by = (perf) => round.messages.filter((m) => m.ev.performative === perf);
  const award = by("AWARD")[0];
  const rejects = by("REJECT");
  const winner = award ? String((award.ev.receivers || [])[0] ?? "") : field(rejects[0] && rejects[0].body, "winner");
  const ranking = Array.isArray(field(award && award.body, "ranking")) ? award.body.ranking : [];
  const scores = new Map();
  ranking.forEach((r, i) => scores.set(String(field(r, "contractor")), { score: field(r, "score"), rank: i + 1 }));
  for (const r of rejects) {
    const who = String((r.ev.receivers || [])[0] ?? "");
    if (!scores.has(who)) scores.set(who, { score: field(r.body, "score"), rank: null });
  }
  if (award && winner && !scores.has(winner)) scores.set(winner, { score: field(award.body, "score"), rank: 1 });

  const box = h("div", { class: "cn-round", dataset: { conversation: round.id, round: round.number } });
  append(box, [h("div", { class: "cn-head" },
    h("span", { class: "cn-number" }, `Round ${round.number}`),
    task.kind ? h("span", { class: "cn-kind" }, task.kind) : null,
    h("span", { class: "cn-task" }, shorten(task.what || "(no task description)", 200)),
    h("span", { class: "muted cn-id" }, ` conversation ${round.id}`))]);
  if (task.description !== undefined) {
    box.appendChild(h("details", { class: "cn-description" }, h("summary", {}, `CFP #${task.cfp.ev.seq}: task description`),
      h("pre", {}, json(task.description))));
  }
  const table = h("table", { class: "cn-bids" });
  table.appendChild(h("thead", {}, h("tr", {}, ["bidder", "capability match", "cost", "latency", "success probability", "score", "rank", "outcome"].map((t) => h("th", {}, t)))));
  const tbody = h("tbody");
  const bids = by("BID");
  const rows = bids.map((b) => ({ who: String(b.ev.sender), b, s: scores.get(String(b.ev.sender)) || {} }));
  rows.sort((a, b) => (a.s.rank ?? 1e9) - (b.s.rank ?? 1e9) || a.b.ev.seq - b.b.ev.seq);
  for (const { who, b, s } of rows) {
    const won = winner && who === winner;
    const rejected = rejects.some((r) => (r.ev.receivers || []).includes(who));
    tbody.appendChild(h("tr", { class: `cn-bid${won ? " winner" : ""}`, dataset: { bidder: who, seq: b.ev.seq } },
      h("td", {}, who, h("span", { class: "muted" }, ` #${b.ev.seq}`)),
      h("td", {}, num(field(b.body, "capability_match"))),
      h("td", {}, num(field(b.body, "cost"))),
      h("td", {}, num(field(b.body, "latency"))),
      h("td", {}, num(field(b.body, "success_probability"))),
      h("td", { class: "cn-score" }, num(s.score)),
      h("td", {}, s.rank ? String(s.rank) : "—"),
      h("td", {}, won ? badge("awarded", "ok") : rejected ? badge("rejected", "bad") : badge("no answer", "unchecked"))));
  }
  if (!rows.length) tbody.appendChild(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "no bids")));
  table.appendChild(tbody);
  box.appendChild(table);

  const steps = h("ul", { class: "cn-steps" });
  if (award) {
    steps.appendChild(h("li", { class: "cn-award" }, badge("AWARD", "ok"), ` #${award.ev.seq} → `,
      h("strong", { class: "cn-winner" }, winner), ` (score ${num(field(award.body, "score"))})`,
      ranking.length ? h("span", { class: "muted" }, `  ranking: ${ranking.map((r) => `${field(r, "contractor")} ${num(field(r, "score"))}`).join(" > ")}`) : null));
  }
  for (const r of rejects) {
    steps.appendChild(h("li", { class: "cn-reject" }, badge("REJECT", "bad"), ` #${r.ev.seq} → ${(r.ev.receivers || []).join(", ")}`,
      ` (score ${num(field(r.body, "score"))}; winner ${textOf(field(r.body, "winner") ?? winner)} with ${num(field(r.body, "winning_score"))})`));
  }
  for (const rep of by("REPORT")) {
    const ok = field(rep.body, "success");
    steps.appendChild(h("li", { class: "cn-report" }, badge("REPORT", ok === true ? "ok" : ok === false ? "bad" : "unchecked"),
      ` #${rep.ev.seq} from ${rep.ev.sender}: ${ok === true ? "success" : ok === false ? "failure" : "?"} · `,
      expandable(field(rep.body, "result"), 100)));
  }
  for (const inf of by("INFORM")) {
    steps.appendChild(h("li", {}, badge("INFORM", "unchecked"), ` #${inf.ev.seq} → ${(inf.ev.receivers || []).join(", ")}: `, expandable(inf.body, 100)));
  }
  const states = bdiStates.get(`task:${round.id}`);
  if (states && states.length) steps.appendChild(h("li", { class: "cn-states muted" }, `task states: ${states.join(" → ")}`));
  box.appendChild(steps);
  return box;
}

// The planner's task:<id> intentions: the states each Contract Net task went through.
async function taskStates(ctx) {
  const updates = ctx.events.filter((e) => e.type === "bdi.update" && String(e.key || "").startsWith("task:"));
  const values = await loadPayloads(ctx, updates, "value");
  const states = new Map();
  for (const ev of updates) {
    const state = field(loadedValue(values.get(ev.seq)), "state");
    if (state === undefined) continue;
    if (!states.has(ev.key)) states.set(ev.key, []);
    states.get(ev.key).push(String(state));
  }
  return states;
}

async function renderMessages(ctx, box) {
  const messages = ctx.events.filter((e) => e.type === "message");
  if (!messages.length) return false;
  const contents = await loadPayloads(ctx, messages, "content");
  const agents = agentsOf(messages);
  const rounds = contractNetRounds(messages, contents);

  const detail = h("div", { class: "msg-detail", id: "msg-detail" },
    h("p", { class: "muted" }, "Select a message (click, or Tab and Enter) to see its content."));
  let selected = null;
  function select(ev, g) {
    if (selected) selected.classList.remove("selected");
    selected = g;
    g.classList.add("selected");
    const env = envelope(contents.get(ev.seq));
    clear(detail);
    append(detail, [
      h("div", { class: "msg-detail-head" }, badge(ev.performative, `perf perf-${cssToken(ev.performative)}`), " ",
        eventLink(ev.seq), ` · ${ev.sender} → ${(ev.receivers || []).join(", ")}`),
      h("dl", { class: "msg-meta" },
        h("dt", {}, "conversation"), h("dd", {}, ev.conversation_id ?? "—"),
        h("dt", {}, "reply to"), h("dd", {}, ev.reply_to ?? "—"),
        h("dt", {}, "message id"), h("dd", {}, env.id ?? "—"),
        h("dt", {}, "protocol"), h("dd", {}, ev.protocol ?? "—"),
        h("dt", {}, "artifacts"), h("dd", {}, (ev.artifacts || []).join(", ") || "—"),
        h("dt", {}, "span"), h("dd", {}, ev.span ?? "")),
      env.error ? h("div", { class: "error-box" }, `could not load the content: ${env.error}`)
        : h("pre", { class: "msg-content" }, json(env.body)),
      env.evidence.length ? h("div", { class: "muted" }, `${env.evidence.length} evidence anchor(s): `,
        env.evidence.map((a) => `${field(a, "doc_id")}#${field(a, "location")}`).join(", ")) : null,
    ]);
  }

  const { head, body } = drawSequence(messages, agents, rounds, select);
  const counts = new Map();
  for (const ev of messages) counts.set(ev.performative, (counts.get(ev.performative) || 0) + 1);
  append(box, [
    h("p", { class: "muted" }, `${messages.length} messages between ${agents.length} agents`,
      rounds.length ? `, ${rounds.length} Contract Net round${rounds.length === 1 ? "" : "s"}` : "", ": ",
      [...counts].map(([p, n]) => `${p} ${n}`).join(" · ")),
    h("div", { class: "seq-scroll", id: "sequence" }, head, body),
    detail,
  ]);
  if (rounds.length) {
    const states = await taskStates(ctx);
    const list = h("div", { class: "cn-rounds", id: "contract-net" });
    for (const round of rounds) list.appendChild(renderRound(round, states));
    append(box, [h("h3", {}, "Contract Net rounds"), list]);
  }
  return true;
}

registerPanel({ id: "messages", title: "Agent messages & Contract Net", order: 10, render: renderMessages });

// --- 2. BDI state per agent ----------------------------------------------------------------------

async function renderBdi(ctx, box) {
  const updates = ctx.events.filter((e) => e.type === "bdi.update");
  if (!updates.length) return false;
  const values = await loadPayloads(ctx, updates, "value");
  const byAgent = new Map();
  for (const ev of updates) {
    const agent = String(ev.agent || "(no agent)");
    if (!byAgent.has(agent)) byAgent.set(agent, []);
    byAgent.get(agent).push(ev);
  }
  const order = KNOWN_AGENTS.filter((a) => byAgent.has(a)).concat([...byAgent.keys()].filter((a) => !KNOWN_AGENTS.includes(a)));
  const grid = h("div", { class: "bdi-agents" });
  for (const agent of order) {
    const events = byAgent.get(agent);
    const now = { beliefs: new Set(), desires: new Set(), intentions: new Set() };
    for (const ev of events) {
      const set = now[ev.component];
      if (!set) continue;
      if (ev.op === "remove") set.delete(ev.key); else set.add(ev.key);
    }
    const table = h("table", { class: "bdi-updates" },
      h("thead", {}, h("tr", {}, ["#", "component", "op", "key", "value"].map((t) => h("th", {}, t)))));
    const tbody = h("tbody");
    for (const ev of events) {
      const entry = values.get(ev.seq);
      const value = !entry ? "" : !entry.ok ? h("span", { class: "problems" }, `could not load: ${entry.error}`)
        : ev.value === undefined ? h("span", { class: "muted" }, "—") : expandable(entry.value, 90);
      tbody.appendChild(h("tr", { class: `bdi-update c-${cssToken(ev.component)} op-${cssToken(ev.op)}`, dataset: { seq: ev.seq, component: ev.component || "", op: ev.op || "" } },
        h("td", { class: "muted" }, eventLink(ev.seq)),
        h("td", {}, h("span", { class: `bdi-component c-${cssToken(ev.component)}` }, ev.component ?? "")),
        h("td", {}, h("span", { class: `bdi-op op-${cssToken(ev.op)}` }, ev.op ?? "")),
        h("td", { class: "bdi-key" }, shorten(ev.key ?? "", 80), ev.key && String(ev.key).length > 80 ? h("span", { class: "muted" }, " (cut)") : null),
        h("td", {}, value)));
    }
    table.appendChild(tbody);
    grid.appendChild(h("section", { class: "bdi-agent", dataset: { agent } },
      h("h3", {}, agent, h("span", { class: "muted" },
        ` · ${events.length} update${events.length === 1 ? "" : "s"} · now ${now.beliefs.size} beliefs, ${now.desires.size} desires, ${now.intentions.size} intentions`)),
      h("div", { class: "bdi-scroll" }, table)));
  }
  box.appendChild(grid);
  return true;
}

registerPanel({ id: "bdi", title: "BDI state per agent", order: 20, render: renderBdi });

// --- 3. audit --------------------------------------------------------------------------------------

async function renderAudit(ctx, box) {
  const audits = ctx.events.filter((e) => e.type === "audit");
  if (!audits.length) return false;
  const reports = await loadPayloads(ctx, audits, "report");
  const talk = ctx.events.filter((e) => e.type === "message" && ["CHALLENGE", "JUSTIFY", "RETRACT"].includes(e.performative));
  const talkContents = await loadPayloads(ctx, talk, "content");
  const said = talk.map((ev) => ({ ev, env: envelope(talkContents.get(ev.seq)) }));
  const used = new Set();

  audits.forEach((ev, index) => {
    const nextSeq = index + 1 < audits.length ? audits[index + 1].seq : Infinity;
    const entry = reports.get(ev.seq);
    const section = h("section", { class: "audit", dataset: { seq: ev.seq } });
    box.appendChild(section);
    if (!entry || !entry.ok) {
      section.appendChild(h("div", { class: "error-box" }, `audit #${ev.seq}: could not load the report: ${entry ? entry.error : "?"}`));
      return;
    }
    const report = entry.value || {};
    const checks = Array.isArray(report.checks) ? report.checks : [];
    const challenges = Array.isArray(report.challenges) ? report.challenges : [];
    const passedCount = checks.filter((c) => c && c.passed).length;
    append(section, [h("div", { class: "audit-head" },
      report.passed ? badge("passed", "ok") : badge("did not pass", "bad"), " ",
      report.blocking ? badge("blocking", "bad") : null, " ",
      `Audit #${ev.seq}`, report.mode ? ` · mode ${report.mode}` : "", ` · ${passedCount}/${checks.length} checks passed`,
      ev.agent ? h("span", { class: "muted" }, ` · by ${ev.agent}`) : null)]);

    // the messages about each challenge: its CHALLENGE, and the planner's JUSTIFY or RETRACT
    function tied(challenge) {
      const claim = textOf(field(challenge, "claim"));
      const cid = field(challenge, "claim_id");
      return said.filter(({ ev: m, env }) => {
        if (m.seq < ev.seq) return false;
        if (m.performative === "CHALLENGE") {
          if (m.seq > nextSeq) return false;
          return (cid !== undefined && field(env.body, "claim_id") === cid) || textOf(field(env.body, "claim")) === claim;
        }
        return textOf(field(env.body, "claim")) === claim;
      });
    }
    function challengeItem(challenge) {
      const msgs = tied(challenge);
      msgs.forEach((m) => used.add(m.ev.seq));
      const outcome = msgs.some((m) => m.ev.performative === "RETRACT") ? badge("retracted", "bad")
        : msgs.some((m) => m.ev.performative === "JUSTIFY") ? badge("justified", "ok") : badge("open", "unchecked");
      const known = new Set(checks.flatMap((k) => (Array.isArray(field(k, "findings")) ? k.findings : []).map((f) => textOf(field(f, "problem")))));
      const reasons = (Array.isArray(field(challenge, "reasons")) ? challenge.reasons : []).filter((r) => !known.has(textOf(r)));
      return h("li", { class: "audit-challenge", dataset: { claim: field(challenge, "claim_id") ?? "" } },
        h("div", {}, outcome, " ", h("strong", {}, textOf(field(challenge, "claim_id") ?? "claim")), ": ",
          h("span", { class: "claim-text" }, shorten(textOf(field(challenge, "claim")), 220)),
          h("span", { class: "muted" }, ` · resolve by ${textOf(field(challenge, "resolve") ?? "?")}`)),
        reasons.length ? h("ul", { class: "reasons" }, reasons.map((r) => h("li", {}, textOf(r)))) : null,
        msgs.length ? h("ul", { class: "audit-messages" }, msgs.map(({ ev: m, env }) =>
          h("li", { class: `audit-msg perf-${cssToken(m.performative)}`, dataset: { seq: m.seq, performative: m.performative } },
            badge(m.performative, `perf perf-${cssToken(m.performative)}`), ` #${m.seq} ${m.sender} → ${(m.receivers || []).join(", ")}: `,
            expandable(env.error ? `could not load: ${env.error}` : env.body, 120),
            env.evidence.length ? h("span", { class: "muted" }, ` (${env.evidence.length} evidence anchors)`) : null))) : null);
    }

    const list = h("div", { class: "audit-checks" });
    for (const check of checks) {
      const name = textOf(field(check, "name"));
      const findings = Array.isArray(field(check, "findings")) ? check.findings : [];
      const mine = challenges.filter((c) => (field(c, "checks") || []).includes(name));
      list.appendChild(h("div", { class: `audit-check ${check.passed ? "passed" : "failed"}`, dataset: { check: name, passed: check.passed ? "1" : "0" } },
        h("div", { class: "check-head" },
          check.passed ? badge("pass", "ok") : badge("fail", check.severity === "warning" ? "waiting" : "bad"), " ",
          h("strong", { class: "check-name" }, name),
          check.severity ? h("span", { class: "muted" }, ` · ${textOf(check.severity)}`) : null),
        h("div", { class: "check-detail" }, expandable(field(check, "detail") ?? "", 240)),
        findings.length ? h("ul", { class: "findings" }, findings.map((f) =>
          h("li", {}, field(f, "claim_id") ? h("strong", {}, `${textOf(f.claim_id)}: `) : null, textOf(field(f, "problem"))))) : null,
        mine.length ? h("ul", { class: "audit-challenges" }, mine.map(challengeItem)) : null));
    }
    section.appendChild(list);
    const loose = challenges.filter((c) => !checks.some((k) => (field(c, "checks") || []).includes(field(k, "name"))));
    if (loose.length) append(section, [h("h3", {}, "Other challenges"), h("ul", { class: "audit-challenges" }, loose.map(challengeItem))]);
  });
  const rest = said.filter(({ ev }) => !used.has(ev.seq));
  if (rest.length) {
    append(box, [h("h3", {}, "Other CHALLENGE / JUSTIFY / RETRACT messages"),
      h("ul", { class: "audit-messages" }, rest.map(({ ev, env }) =>
        h("li", { class: "audit-msg", dataset: { seq: ev.seq, performative: ev.performative } },
          badge(ev.performative, `perf perf-${cssToken(ev.performative)}`), ` #${ev.seq} ${ev.sender} → ${(ev.receivers || []).join(", ")}: `,
          expandable(env.error ? `could not load: ${env.error}` : env.body, 140))))]);
  }
  return true;
}

registerPanel({ id: "audit", title: "Audit", order: 30, render: renderAudit });

// --- 4. argumentation ---------------------------------------------------------------------------

const LABEL_WORDS = { IN: "accepted", OUT: "rejected", UNDEC: "undecided" };

function wrapLines(text, width, lines) {
  const words = String(text).replace(/\s+/g, " ").trim().split(" ");
  const out = [];
  let line = "";
  for (const word of words) {
    const next = line ? `${line} ${word}` : word;
    if (next.length <= width) { line = next; continue; }
    if (line) out.push(line);
    line = word.length > width ? `${word.slice(0, width - 1)}…` : word;
    if (out.length === lines) break;
  }
  if (line && out.length < lines) out.push(line);
  if (out.length === lines && out.join(" ").length < String(text).replace(/\s+/g, " ").trim().length) {
    out[lines - 1] = `${out[lines - 1].slice(0, width - 1)}…`;
  }
  return out.slice(0, lines);
}

// Columns by attack depth (an attacker left of what it attacks), rows aligned with targets.
function argumentLayout(ids, attacks) {
  const targetsOf = new Map(ids.map((id) => [id, []]));
  for (const [a, b] of attacks) if (targetsOf.has(a) && targetsOf.has(b) && a !== b) targetsOf.get(a).push(b);
  const depth = new Map(ids.map((id) => [id, 0]));
  for (let round = 0; round < ids.length; round++) {  // longest attack chain, capped for cycles
    let changed = false;
    for (const id of ids) {
      const d = Math.max(0, ...targetsOf.get(id).map((t) => depth.get(t) + 1));
      if (d !== depth.get(id) && d <= ids.length) { depth.set(id, d); changed = true; }
    }
    if (!changed) break;
  }
  const maxDepth = Math.max(0, ...depth.values());
  const column = new Map(ids.map((id) => [id, maxDepth - depth.get(id)]));
  const row = new Map();
  for (let col = maxDepth; col >= 0; col--) {
    const members = ids.filter((id) => column.get(id) === col);
    const wanted = (id) => {
      const rows = targetsOf.get(id).map((t) => row.get(t)).filter((r) => r !== undefined);
      return rows.length ? Math.min(...rows) : null;
    };
    members.sort((a, b) => (wanted(a) ?? 1e9) - (wanted(b) ?? 1e9) || ids.indexOf(a) - ids.indexOf(b));
    let free = 0;
    for (const id of members) {
      const r = Math.max(free, wanted(id) ?? free);
      row.set(id, r);
      free = r + 1;
    }
  }
  return { column, row, columns: maxDepth + 1, rows: Math.max(0, ...row.values()) + 1 };
}

function boxEdge(from, to, w, hgt) {
  // the point where the line from the centre `from` towards `to` leaves a w×hgt box
  const dx = to.x - from.x, dy = to.y - from.y;
  if (!dx && !dy) return { x: from.x, y: from.y };
  const scale = Math.min(dx ? (w / 2) / Math.abs(dx) : Infinity, dy ? (hgt / 2) / Math.abs(dy) : Infinity);
  return { x: from.x + dx * scale, y: from.y + dy * scale };
}

function drawArgumentation(graph) {
  const args = graph.arguments;
  const ids = args.map((a) => String(a.id));
  const attacks = (graph.attacks || []).filter((p) => Array.isArray(p) && p.length === 2).map(([a, b]) => [String(a), String(b)]);
  const labels = graph.labels || {};
  const grounded = new Set((graph.grounded || []).map(String));
  const { column, row, columns, rows } = argumentLayout(ids, attacks);
  const W = 250, H = 62, GAPX = 90, GAPY = 22, PAD = 16;
  const width = PAD * 2 + columns * W + (columns - 1) * GAPX;
  const height = PAD * 2 + rows * H + (rows - 1) * GAPY;
  const center = (id) => ({ x: PAD + column.get(id) * (W + GAPX) + W / 2, y: PAD + row.get(id) * (H + GAPY) + H / 2 });
  const svg = svgEl("svg", {
    class: "arg-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `Argumentation graph: ${ids.length} arguments, ${attacks.length} attacks; grounded extension ${[...grounded].join(", ") || "empty"}`,
  });
  const edges = svgEl("g", { class: "attacks" });
  const attackSet = new Set(attacks.map(([a, b]) => `${a}\u0000${b}`));
  for (const [a, b] of attacks) {
    if (!column.has(a) || !column.has(b)) continue;
    const g = svgEl("g", { class: "attack", "data-from": a, "data-to": b });
    g.appendChild(svgTitle(`${a} attacks ${b}`));
    const ca = center(a), cb = center(b);
    if (a === b) {
      const x = ca.x + W / 2 - 30, y = ca.y - H / 2;
      g.appendChild(svgEl("path", { class: "attack-line", d: `M${x} ${y} c0 -26 34 -26 34 0`, fill: "none" }));
      g.appendChild(svgEl("path", { class: "attack-head", d: `M${x + 34} ${y} l-4.5 -8 l9 0 z` }));
    } else {
      const start = boxEdge(ca, cb, W, H), end = boxEdge(cb, ca, W, H);
      const mutual = attackSet.has(`${b}\u0000${a}`);
      const mx = (start.x + end.x) / 2, my = (start.y + end.y) / 2;
      const len = Math.hypot(end.x - start.x, end.y - start.y) || 1;
      const bend = mutual ? 18 : 0;
      const cx = mx - ((end.y - start.y) / len) * bend, cy = my + ((end.x - start.x) / len) * bend;
      g.appendChild(svgEl("path", { class: "attack-line", d: `M${start.x} ${start.y} Q${cx} ${cy} ${end.x} ${end.y}`, fill: "none" }));
      const ang = Math.atan2(end.y - cy, end.x - cx);
      const p1 = { x: end.x - 11 * Math.cos(ang) + 5 * Math.sin(ang), y: end.y - 11 * Math.sin(ang) - 5 * Math.cos(ang) };
      const p2 = { x: end.x - 11 * Math.cos(ang) - 5 * Math.sin(ang), y: end.y - 11 * Math.sin(ang) + 5 * Math.cos(ang) };
      g.appendChild(svgEl("path", { class: "attack-head", d: `M${end.x} ${end.y} L${p1.x} ${p1.y} L${p2.x} ${p2.y} z` }));
    }
    edges.appendChild(g);
  }
  svg.appendChild(edges);
  for (const arg of args) {
    const id = String(arg.id);
    const label = String(labels[id] || (grounded.has(id) ? "IN" : "UNDEC"));
    const c = center(id);
    const g = svgEl("g", { class: `argument lab-${cssToken(label)}${grounded.has(id) ? " grounded" : ""}`, "data-id": id, "data-label": label });
    g.appendChild(svgTitle(`${id} (${label}, ${LABEL_WORDS[label] || label}): ${textOf(arg.claim)}`));
    g.appendChild(svgEl("rect", { class: "arg-box", x: c.x - W / 2, y: c.y - H / 2, width: W, height: H, rx: 7 }));
    g.appendChild(svgEl("text", { class: "arg-id", x: c.x - W / 2 + 9, y: c.y - H / 2 + 16 }, shorten(id, 22)));
    g.appendChild(svgEl("text", { class: "arg-label", x: c.x + W / 2 - 9, y: c.y - H / 2 + 16, "text-anchor": "end" },
      `${label} · ${LABEL_WORDS[label] || ""}`));
    wrapLines(textOf(arg.claim), 38, 2).forEach((line, i) => {
      g.appendChild(svgEl("text", { class: "arg-claim", x: c.x - W / 2 + 9, y: c.y - H / 2 + 34 + i * 15 }, line));
    });
    svg.appendChild(g);
  }
  return svg;
}

async function renderArgumentation(ctx, box) {
  const graph = ctx.result && typeof ctx.result === "object" ? ctx.result.argumentation : undefined;
  if (!graph || typeof graph !== "object") return false;
  if (graph.error !== undefined || !Array.isArray(graph.arguments)) {
    box.appendChild(h("div", { class: "error-box" }, `The argumentation graph could not be built: ${textOf(graph.error ?? "no arguments")}`));
    return true;
  }
  if (!graph.arguments.length) {
    box.appendChild(h("p", { class: "muted" }, "The argumentation graph has no arguments (the answer made no claims)."));
    return true;
  }
  const labels = graph.labels || {};
  const grounded = (graph.grounded || []).map(String);
  const legend = h("div", { class: "arg-legend", id: "arg-legend" },
    ["IN", "OUT", "UNDEC"].map((l) => h("span", { class: `arg-key lab-${l}` }, h("span", { class: "swatch" }), `${l}: ${LABEL_WORDS[l]}`)),
    h("span", { class: "arg-key attack-key" }, h("span", { class: "arrow" }, "──▶"), " attacks"),
    h("span", { class: "arg-key" }, h("span", { class: "swatch grounded" }), " grounded extension (thick border)"));
  const attackersOf = (id) => (graph.attacks || []).filter((p) => String(p[1]) === id).map((p) => String(p[0]));
  const targetsOf = (id) => (graph.attacks || []).filter((p) => String(p[0]) === id).map((p) => String(p[1]));
  const list = h("ul", { class: "arg-list", id: "arg-list" });
  for (const arg of graph.arguments) {
    const id = String(arg.id);
    const label = String(labels[id] || "UNDEC");
    const support = ((graph.supports || {})[id] || []);
    list.appendChild(h("li", { dataset: { id, label } },
      badge(`${label} · ${LABEL_WORDS[label] || label}`, label === "IN" ? "ok" : label === "OUT" ? "bad" : "unchecked"), " ",
      h("strong", {}, id), ": ", textOf(arg.claim),
      attackersOf(id).length ? h("span", { class: "muted" }, ` · attacked by ${attackersOf(id).join(", ")}`) : null,
      targetsOf(id).length ? h("span", { class: "muted" }, ` · attacks ${targetsOf(id).join(", ")}`) : null,
      support.length ? h("span", { class: "muted" }, ` · supported by ${support.map((s) => s && s.doc_id !== undefined ? `${s.doc_id}#${s.location}` : textOf(field(s, "ref") ?? s)).join(", ")}`) : null));
  }
  append(box, [
    h("p", {}, `Grounded extension (accepted): `, h("span", { id: "arg-grounded" }, grounded.length ? grounded.join(", ") : "(empty)"),
      h("span", { class: "muted" }, ` · ${graph.arguments.length} arguments, ${(graph.attacks || []).length} attacks`)),
    legend,
    h("div", { class: "arg-scroll" }, drawArgumentation(graph)),
    h("h3", {}, "Arguments"), list,
  ]);
  return true;
}

registerPanel({ id: "argumentation", title: "Argumentation", order: 40, render: renderArgumentation });

// --- 5. artifacts --------------------------------------------------------------------------------

function sizeText(size) {
  if (typeof size !== "number") return "? bytes";
  if (size < 1024) return `${size} bytes`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KiB`;
  return `${(size / 1024 / 1024).toFixed(1)} MiB`;
}

async function renderArtifacts(ctx, box) {
  const artifacts = ctx.events.filter((e) => e.type === "artifact");
  if (!artifacts.length) return false;
  const list = h("div", { class: "artifacts" });
  for (const ev of artifacts) {
    const name = String(ev.name ?? "");
    const url = artifactUrl(ctx.id, name);
    const type = String(ev.media_type || "application/octet-stream");
    const meta = h("div", { class: "artifact-meta" },
      h("span", { class: "artifact-name" }, name), " ",
      h("span", { class: "muted" }, `${type} · ${sizeText(ev.size)} · `),
      h("span", { class: "muted digest", title: String(ev.digest ?? "") }, `${String(ev.digest ?? "").slice(0, 19)}…`),
      h("span", { class: "muted" }, ` · event #${ev.seq}`));
    const item = h("div", { class: "artifact", dataset: { name, seq: ev.seq, mediaType: type } });
    if (IMAGE_TYPES.has(type)) {
      item.classList.add("image");
      append(item, [url ? h("figure", {}, h("img", { class: "artifact-img", src: url, alt: `artifact ${name}` }), h("figcaption", {}, meta))
        : h("figure", {}, h("div", { class: "artifact-missing muted" }, `${name}: not included in this export`), h("figcaption", {}, meta))]);
    } else {
      append(item, [url ? h("a", { class: "artifact-link", href: url, download: name.split("/").pop() || "artifact" }, "download") : h("span", { class: "artifact-missing muted" }, "not included in this export"), " ", meta]);
    }
    list.appendChild(item);
  }
  box.appendChild(list);
  return true;
}

registerPanel({ id: "artifacts", title: "Artifacts", order: 50, render: renderArtifacts });
