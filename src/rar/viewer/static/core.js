// RAR viewer, shared core: DOM helpers, the JSON API (or the data embedded in an exported page)
// and the registry of run-page panels. The viewer is plain classic scripts sharing one global
// scope, loaded in the order of rar.viewer.app.SCRIPTS (core first, main last).
// Every value that comes from the record is inserted as text (textContent / createTextNode);
// nothing from the record is ever parsed as HTML.
"use strict";
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
// every blob their payload references need (see rar.export.html), as JSON in the script element
// #rar-data, or gzip + base64 in the element #rar-data-gz for a big run. Then nothing is
// fetched and api() answers from it. OFFLINE is set once OFFLINE_READY has settled.
let OFFLINE = null;

async function loadOffline() {
  const plain = document.getElementById("rar-data");
  if (plain) return JSON.parse(plain.textContent);
  const packed = document.getElementById("rar-data-gz");
  if (!packed) return null;
  if (typeof DecompressionStream !== "function") {
    throw new Error("this browser cannot read a compressed export (no DecompressionStream); open it in a current Chromium, Firefox or Safari");
  }
  const bytes = Uint8Array.from(atob(packed.textContent.replace(/\s+/g, "")), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

const OFFLINE_READY = loadOffline().then((data) => { OFFLINE = data; return data; });

// Blobs in an export are numbered; the links between them (a chain's head, a node's item and
// prev) are those numbers. An event's payload reference carries its blob's number as "@". A blob
// cut at export time is in OFFLINE.cut, one that could not be read in OFFLINE.errors.
function offlineBlob(ref) {
  const number = typeof ref === "string" ? (OFFLINE.heads || {})[ref] : ref;
  const key = String(number);
  if (typeof number !== "number" || number < 0 || number >= OFFLINE.blobs.length) {
    throw new Error(`blob ${ref} is not in this export`);
  }
  if (Object.prototype.hasOwnProperty.call(OFFLINE.errors || {}, key)) throw new Error(OFFLINE.errors[key]);
  if (Object.prototype.hasOwnProperty.call(OFFLINE.cut || {}, key)) return OFFLINE.cut[key];
  return OFFLINE.blobs[number];
}

// The plain value of a linked form: message chains ({"$chain": head, "length": n}) unlinked.
function offlineUnlink(value) {
  if (Array.isArray(value)) return value.map(offlineUnlink);
  if (!value || typeof value !== "object") return value;
  const keys = Object.keys(value);
  if (keys.length === 2 && "$chain" in value && "length" in value) {
    const items = [];
    let node = value.$chain;
    while (node !== undefined && node !== null) {
      const body = offlineBlob(node);
      if (!body || typeof body !== "object" || !("item" in body)) throw new Error(`chain node ${node} is not in this export`);
      items.push(offlineUnlink(offlineBlob(body.item)));
      node = body.prev;
      if (items.length > value.length) throw new Error("a message chain is longer than recorded");
    }
    items.reverse();
    return items;
  }
  const out = {};
  for (const k of keys) out[k] = offlineUnlink(value[k]);
  return out;
}

let offlineBySeq = null;

function offlinePayload(seq, field) {
  if (!offlineBySeq) offlineBySeq = new Map(OFFLINE.events.events.map((e) => [String(e.seq), e]));
  const ev = offlineBySeq.get(String(seq));
  if (!ev) throw new Error(`event ${seq} is not in this export`);
  const ref = ev[field];
  if (!isPayloadRef(ref)) throw new Error(`event ${seq} has no payload ${field}`);
  if ("value" in ref) return offlineUnlink(ref.value);
  return offlineUnlink(offlineBlob(ref["@"]));
}

// The events API's filters (?type=, ?agent=, ?span=), as the server applies them.
function eventMatches(ev, params) {
  const type = params.get("type") || "";
  const agent = params.get("agent") || "";
  const span = params.get("span") || "";
  const full = ev.type === "effect" ? `effect:${ev.kind}` : String(ev.type);
  if (type && type !== String(ev.type) && type !== full) return false;
  if (agent && ev.agent !== agent) return false;
  const where = String(ev.span || "run");
  return !span || where === span || where.startsWith(`${span}/`);
}

function offlineApi(path) {
  const [pathname, query] = path.split("?");
  const url = { pathname, searchParams: new URLSearchParams(query || "") };
  const runPath = `/api/runs/${encodeURIComponent(OFFLINE.run.id)}`;
  if (url.pathname === runPath) return OFFLINE.run;
  if (url.pathname === `${runPath}/events`) {
    const all = OFFLINE.events;
    const offset = Number(url.searchParams.get("offset") || 0);
    const limit = Number(url.searchParams.get("limit") || PAGE);
    const matching = all.events.filter((ev) => eventMatches(ev, url.searchParams));
    const events = matching.slice(offset, offset + limit);
    const end = offset + events.length;
    return { ...all, offset, limit, events, total: matching.length, all: all.events.length,
      next_offset: end < matching.length ? end : null };
  }
  if (url.pathname === `${runPath}/flow`) return OFFLINE.flow || { id: OFFLINE.run.id, flows: [], skipped: [] };
  if (url.pathname === "/api/payload") {
    return { value: offlinePayload(url.searchParams.get("seq"), url.searchParams.get("field")) };
  }
  throw new Error(`${path} is not in this export`);
}

async function api(path) {
  await OFFLINE_READY;
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
  const key = `${runId}:${event.seq}:${field}`;
  if (!payloadCache.has(key)) {
    const q = new URLSearchParams({ run: runId, seq: String(event.seq), field });
    payloadCache.set(key, api(`/api/payload?${q}`).then((b) => b.value));
  }
  return payloadCache.get(key);
}

function showError(el, err) {
  append(el, [h("div", { class: "error-box" }, String(err && err.message ? err.message : err))]);
}


// --- what a viewer that starts runs adds -------------------------------------------------------
// `rar view --allow-runs` also loads actions.js, which fills these in; the read-only viewer and
// an exported page leave them empty, so no control that changes anything is ever drawn there
// (studies.js adds the read-only study pages to PAGES; an exported page never routes to them).
//   PAGES: { match(pathname) → match or null, render(root, match) → Promise }, tried first;
//   CONTROLS.runActions(box, detail), CONTROLS.eventRow(head, ev, runId) and
//   CONTROLS.playerControls(controls, currentStep, runId, events) decorate the run page.
const PAGES = [];
const CONTROLS = {};

// --- run-page panels -------------------------------------------------------------------------
// A panel file calls registerPanel({ id, title, order, render }) at load time. Once the run's
// events are loaded, the run page calls render(ctx, box) for each panel, in `order`, with
//   ctx = { id, detail, events, result, payload(ev, field) → Promise<plain value> }
// and an empty <div id="panel-{id}"> to fill. render returns false to hide the section (nothing
// to show for this run). A panel that throws shows its error in its own box only.
const PANELS = [];

function registerPanel(panel) {
  PANELS.push(panel);
  PANELS.sort((a, b) => (a.order ?? 100) - (b.order ?? 100));
}

// The URL of a run's artifact (a file recorded by an `artifact` event): served by the viewer,
// or, in an exported page, the data: URL embedded for it (null when the export left it out).
function artifactUrl(runId, name) {
  if (OFFLINE) {
    const found = (OFFLINE.artifacts || {})[name];
    return found && found.url ? found.url : null;
  }
  const path = String(name).split("/").map(encodeURIComponent).join("/");
  return `/api/runs/${encodeURIComponent(runId)}/artifacts/${path}`;
}

// A small, safe subset of Markdown for recorded answers: paragraphs, "- " / "1. " lists,
// "#" headings, fenced code, table lines kept as preformatted text, **bold**, *italic* and
// `code`. Everything is built with DOM nodes and text nodes: nothing recorded is ever parsed as
// HTML, so a <script> in an answer shows as text.
function renderMarkdown(text) {
  const root = document.createElement("div");
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  let list = null;
  let para = null;
  let table = null;
  const flush = () => { list = null; para = null; table = null; };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (/^```/.test(line)) {
      const code = [];
      for (i += 1; i < lines.length && !/^```/.test(lines[i]); i++) code.push(lines[i]);
      flush();
      root.appendChild(h("pre", {}, code.join("\n")));
      continue;
    }
    if (!line.trim()) { flush(); continue; }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    const bullet = line.match(/^\s*[-*+]\s+(.*)$/);
    const numbered = line.match(/^\s*\d+[.)]\s+(.*)$/);
    if (heading) {
      flush();
      root.appendChild(inline(h(`h${Math.min(6, heading[1].length + 2)}`, {}), heading[2]));
    } else if (bullet || numbered) {
      const tag = bullet ? "ul" : "ol";
      if (!list || list.tagName.toLowerCase() !== tag) {
        flush();
        list = root.appendChild(h(tag));
      }
      list.appendChild(inline(h("li"), (bullet || numbered)[1]));
    } else if (/^\s*\|/.test(line)) {
      if (!table) { flush(); table = root.appendChild(h("pre", { class: "md-table" })); }
      table.appendChild(document.createTextNode((table.textContent ? "\n" : "") + line));
    } else if (list && /^\s+\S/.test(line)) {
      inline(list.lastChild, " " + line.trim());
    } else {
      if (!para) { flush(); para = root.appendChild(h("p")); } else para.appendChild(document.createTextNode(" "));
      inline(para, line.trim());
    }
  }
  return root;
}

function inline(el, text) {
  const pattern = /(\*\*[^*]+\*\*|`[^`]+`|\*[^*\s][^*]*\*)/g;
  let last = 0;
  for (const m of String(text).matchAll(pattern)) {
    if (m.index > last) el.appendChild(document.createTextNode(text.slice(last, m.index)));
    const token = m[0];
    if (token.startsWith("**")) el.appendChild(h("strong", {}, token.slice(2, -2)));
    else if (token.startsWith("`")) el.appendChild(h("code", {}, token.slice(1, -1)));
    else el.appendChild(h("em", {}, token.slice(1, -1)));
    last = m.index + token.length;
  }
  if (last < text.length) el.appendChild(document.createTextNode(text.slice(last)));
  return el;
}

// A link to an event of the run page's timeline: the page loads the timeline up to it, opens
// the spans around it and scrolls to it.
function eventLink(seq, label) {
  const link = h("a", { href: `#event-${seq}`, class: "event-link", dataset: { seq } }, label ?? `#${seq}`);
  link.addEventListener("click", (e) => {
    e.preventDefault();
    document.dispatchEvent(new CustomEvent("rar:goto", { detail: { seq: Number(seq) } }));
  });
  return link;
}
