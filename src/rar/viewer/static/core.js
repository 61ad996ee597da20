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
