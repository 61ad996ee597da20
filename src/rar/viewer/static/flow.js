// RAR viewer: the Flow panel — a run's agentic flows (rar.flow) as graphs. One graph per flow
// walk, from /api/runs/{id}/flow (rar.viewer.flows; an exported page embeds the same answer):
// a node per flow.step (agent, category, split "3/5", status and the glyphs it added) and per
// flow.merge ("5↣1"), edges from each node's parents, laid out left to right in layers (a node's
// layer is the longest path to it, so the splits of one step share a column); then the walk's
// execution-graph strings and its statistics from flow.end.
// Every recorded value is inserted as text; the SVG is built element by element (svgEl, from
// panels.js). The work is linear in nodes + edges: a flow of 200 splits draws in one pass.
"use strict";

const FLOW_GLYPHS = [
  ["⚠", "retried"], ["☢", "fatal error"], ["✓", "grading passed"], ["✗", "grading failed"],
  ["○", "skipped"], ["‖", "continuation"],
];
const FLOW_MARKS = new Set(FLOW_GLYPHS.map(([g]) => g));
const FLOW_TYPES = {
  START_CONVERSATION: "new conv.",
  START_CONVERSATION_WITH_SYSTEM_PROMPT: "new conv. + system",
  CONVERSATION: "conversation",
  CONVERSATION_WITH_SYSTEM_PROMPT: "conv. + system",
  COMPLETION: "completion",
  PROCESSING_ONLY: "processing only",
};
const FLOW_STATS = [
  ["requests", "requests"], ["cached", "cached"], ["input_tokens", "input tokens"],
  ["output_tokens", "output tokens"], ["request_duration_s", "request duration"],
  ["effective_duration_s", "effective duration"], ["tps", "tokens / s"],
  ["output_tps", "output tokens / s"], ["cost", "cost"],
];
const FLOW_GRAPHS_SHOWN = 50;
const FLOW_BOX = { W: 184, H: 50, GAPX: 38, GAPY: 12, PAD: 14 };
const FLOW_CENTRED = 12;  // layers up to this tall are centred on each other; taller: top-aligned
const flowCompare = new Intl.Collator("en", { numeric: true }).compare;
const flowNumbers = new Intl.NumberFormat("en-US");  // one formatter: toLocaleString makes one per call

function ffmt(n) {
  return typeof n === "number" ? flowNumbers.format(n) : String(n ?? "");
}

function flowSplit(step) {
  return Array.isArray(step.split) && step.split.length === 2 ? `${step.split[0]}/${step.split[1]}` : "";
}

// The glyphs a node shows: those among its symbols, and what its status and grade say when the
// symbols do not (an error is ☢, a skipped step ○, a grade ✓ or ✗).
function flowMarks(step) {
  const marks = (Array.isArray(step.symbols) ? step.symbols : []).map(String).filter((s) => FLOW_MARKS.has(s));
  if (step.status === "error" && !marks.includes("☢")) marks.push("☢");
  if (step.status === "skipped" && !marks.includes("○")) marks.push("○");
  if (step.grade === true && !marks.includes("✓")) marks.push("✓");
  if (step.grade === false && !marks.includes("✗")) marks.push("✗");
  return marks;
}

function flowRange(item) {
  const r = item.events;
  if (!r || typeof r !== "object") return "no events in its span";
  return r.first === r.last ? `event #${r.first}` : `events #${r.first}–#${r.last} (${ffmt(r.count)})`;
}

function flowTooltip(item) {
  const lines = [];
  if (item.kind === "merge") {
    lines.push(`merge ${item.inputs}↣${item.outputs} by ${item.agent}` + (item.errored ? `, ${item.errored} errored` : ""));
  } else {
    const split = flowSplit(item);
    lines.push(`${item.agent}${split ? ` ${split}` : ""} · ${item.status}` + (item.category ? ` · category ${item.category}` : ""));
    lines.push(`${item.agent_type} · ${ffmt(item.attempts)} model call${item.attempts === 1 ? "" : "s"}` +
      (item.grade === true ? " · grade passed" : item.grade === false ? " · grade failed" : "") +
      (item.next ? ` · next ${item.next}` : ""));
    if (Array.isArray(item.symbols) && item.symbols.length) lines.push(`graph: ${item.symbols.join(", ")}`);
    if (item.error) lines.push(`error ${item.error.type}: ${item.error.message}`);
  }
  lines.push(`span ${item.node}`);
  lines.push(`${flowRange(item)} · ${item.kind === "merge" ? "flow.merge" : "flow.step"} #${item.seq}`);
  return lines.join("\n");
}

// Longest-path layers over the parents that are nodes of this flow (Kahn's order, in the order
// recorded; what a cycle leaves is placed after its placed parents), then each layer ordered by
// where its parents sit and by node id. Returns { place: Map node → { layer, slot }, layers,
// tallest, parentsOf }; a layer taller than FLOW_CENTRED is top-aligned, shorter ones centred.
function flowLayout(items) {
  const known = new Map(items.map((it, i) => [it.node, i]));
  const parentsOf = items.map((it) => [...new Set((it.parents || []).map(String))]
    .filter((p) => known.has(p) && p !== it.node).map((p) => known.get(p)));
  const children = items.map(() => []);
  const waiting = parentsOf.map((ps) => ps.length);
  parentsOf.forEach((ps, i) => { for (const p of ps) children[p].push(i); });
  const layer = new Array(items.length).fill(-1);
  const queue = [];
  items.forEach((_, i) => { if (!waiting[i]) { layer[i] = 0; queue.push(i); } });
  for (let head = 0; head < queue.length; head++) {
    const i = queue[head];
    for (const c of children[i]) {
      layer[c] = Math.max(layer[c], layer[i] + 1);
      if (--waiting[c] === 0) queue.push(c);
    }
  }
  items.forEach((_, i) => {  // in a cycle: after the parents already placed
    if (waiting[i] > 0) layer[i] = parentsOf[i].reduce((m, p) => Math.max(m, layer[p] + 1), 0);
  });
  const layers = [];
  items.forEach((_, i) => { (layers[layer[i]] = layers[layer[i]] || []).push(i); });
  const tallest = layers.reduce((m, l) => Math.max(m, l ? l.length : 0), 0);
  const slot = new Array(items.length).fill(0);
  for (const members of layers) {
    if (!members) continue;
    const key = new Map(members.map((i) => [i, parentsOf[i].reduce((m, p) => (layer[p] < layer[i] ? Math.min(m, slot[p]) : m), -1 >>> 0)]));
    members.sort((a, b) => key.get(a) - key.get(b) || flowCompare(items[a].node, items[b].node));
    const top = tallest <= FLOW_CENTRED ? (tallest - members.length) / 2 : 0;
    members.forEach((i, k) => { slot[i] = top + k; });
  }
  const place = new Map(items.map((it, i) => [it.node, { layer: layer[i], slot: slot[i] }]));
  return { place, layers: layers.length, tallest, parentsOf };
}

function drawFlow(flow, items, onSelect) {
  const { W, H, GAPX, GAPY, PAD } = FLOW_BOX;
  const { place, layers, tallest, parentsOf } = flowLayout(items);
  const width = PAD * 2 + layers * W + Math.max(0, layers - 1) * GAPX;
  const height = PAD * 2 + tallest * H + Math.max(0, tallest - 1) * GAPY;
  const at = (it) => {
    const p = place.get(it.node);
    return { x: PAD + p.layer * (W + GAPX), y: PAD + p.slot * (H + GAPY) };
  };
  const svg = svgEl("svg", {
    class: "flow-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "group",
    "aria-label": `Flow ${flow.name}: ${items.length} nodes in ${layers} layers`,
  });
  const edges = svgEl("g", { class: "flow-edges" });
  const nodes = svgEl("g", { class: "flow-nodes" });
  const elements = new Map();
  items.forEach((it, i) => {
    const to = at(it);
    for (const p of parentsOf[i]) {
      const from = at(items[p]);
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x - 2, y2 = to.y + H / 2;
      const bend = Math.max(18, (x2 - x1) / 2);
      const d = `M${x1} ${y1} C${x1 + bend} ${y1} ${x2 - bend} ${y2} ${x2} ${y2} M${x2 - 7} ${y2 - 4} L${x2} ${y2} L${x2 - 7} ${y2 + 4}`;
      const bad = it.status === "error" || items[p].status === "error";
      edges.appendChild(svgEl("path", { class: `flow-edge${bad ? " error" : ""}`, d, "data-from": items[p].node, "data-to": it.node }));
    }
    const { x, y } = to;
    const merge = it.kind === "merge";
    const status = merge ? (it.errored ? "errored" : "ok") : String(it.status || "ok");
    const g = svgEl("g", {
      class: `flow-node ${merge ? "merge" : "step"} status-${cssToken(status)}` +
        (it.grade === true ? " grade-true" : it.grade === false ? " grade-false" : ""),
      tabindex: 0, role: "button", "data-node": it.node, "data-kind": it.kind, "data-agent": it.agent,
      "data-status": status, "data-layer": place.get(it.node).layer, "data-seq": it.seq,
      "data-split": merge ? null : flowSplit(it) || null, "aria-label": `${it.agent} ${merge ? "merge" : flowSplit(it)} ${status}`,
    });
    g.appendChild(svgTitle(flowTooltip(it)));
    g.appendChild(svgEl("rect", { class: "flow-box", x, y, width: W, height: H, rx: merge ? H / 2 : 6 }));
    if (merge) {
      g.appendChild(svgEl("text", { class: "flow-merge-label", x: x + W / 2, y: y + 21, "text-anchor": "middle" }, `${it.inputs}↣${it.outputs}`));
      const sub = svgEl("text", { class: "flow-sub", x: x + W / 2, y: y + 38, "text-anchor": "middle" },
        shorten(String(it.agent), it.errored ? 16 : 27));
      if (it.errored) sub.appendChild(svgEl("tspan", { class: "flow-errored" }, ` · ${it.errored} errored`));
      g.appendChild(sub);
    } else {
      const marks = flowMarks(it);
      let left = x + 9;
      if (it.category) {
        const cat = shorten(String(it.category), 4);
        const cw = 9 + cat.length * 7;
        g.appendChild(svgEl("rect", { class: "flow-cat-box", x: left, y: y + 6, width: cw, height: 16, rx: 3 }));
        g.appendChild(svgEl("text", { class: "flow-cat", x: left + cw / 2, y: y + 18, "text-anchor": "middle" }, cat));
        left += cw + 6;
      }
      const room = Math.max(6, Math.floor((x + W - 8 - left) / 7.2));
      g.appendChild(svgEl("text", { class: "flow-agent", x: left, y: y + 19 }, shorten(String(it.agent), room)));
      if (marks.length) {  // a badge on the top edge, clear of the name
        const mw = 8 + marks.length * 17;
        g.appendChild(svgEl("rect", { class: "flow-marks-box", x: x + W - 8 - mw, y: y - 9, width: mw, height: 18, rx: 9 }));
        g.appendChild(svgEl("text", { class: "flow-marks", x: x + W - 8 - mw / 2, y: y + 5, "text-anchor": "middle" }, marks.join(" ")));
      }
      const calls = `${ffmt(it.attempts)} call${it.attempts === 1 ? "" : "s"}`;
      const sub = [flowSplit(it), FLOW_TYPES[it.agent_type] || String(it.agent_type || ""), calls].filter(Boolean).join(" · ");
      g.appendChild(svgEl("text", { class: "flow-sub", x: x + 9, y: y + 39 }, shorten(sub, 28)));
    }
    nodes.appendChild(g);
    elements.set(it.node, g);
  });
  if (edges.childNodes.length > 60) svg.classList.add("dense");  // many edges: fainter lines
  svg.appendChild(edges);
  svg.appendChild(nodes);
  const pick = (e) => {
    const g = e.target && e.target.closest ? e.target.closest("g.flow-node") : null;
    return g && elements.get(g.dataset.node) === g ? g : null;
  };
  svg.addEventListener("click", (e) => { const g = pick(e); if (g) onSelect(g.dataset.node); });
  svg.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" && e.key !== " ") return;
    const g = pick(e);
    if (g) { e.preventDefault(); onSelect(g.dataset.node); }
  });
  return { svg, elements };
}

function flowGoto(item) {
  const r = item.events;
  const seq = r && r.first ? r.first : item.seq;
  document.dispatchEvent(new CustomEvent("rar:goto", { detail: { seq: Number(seq), span: item.node, last: r ? Number(r.last) : null } }));
}

function flowDetail(item, byNode, select) {
  const merge = item.kind === "merge";
  const nodeButton = (id) => {
    if (!byNode.has(id)) return h("span", { class: "muted" }, `${id} (not in this flow)`);
    const other = byNode.get(id);
    const b = h("button", { type: "button", class: "flow-parent", dataset: { node: id } },
      `${other.agent}${other.kind === "merge" ? ` ${other.inputs}↣${other.outputs}` : flowSplit(other) ? ` ${flowSplit(other)}` : ""}`);
    b.addEventListener("click", () => select(id));
    return b;
  };
  const r = item.events;
  const show = h("button", { type: "button", class: "flow-show", id: "flow-show" }, "show its span in the timeline");
  show.addEventListener("click", () => flowGoto(item));
  const rows = [
    ["span", h("code", { class: "flow-node-id" }, item.node)],
    ["events", r ? h("span", { class: "flow-range" }, eventLink(r.first, `#${r.first}`), r.last !== r.first ? [" – ", eventLink(r.last, `#${r.last}`)] : null,
      ` (${ffmt(r.count)} event${r.count === 1 ? "" : "s"}) `, show) : h("span", { class: "muted" }, "none recorded in this span")],
    [merge ? "flow.merge" : "flow.step", eventLink(item.seq, `event #${item.seq}`)],
    ["follows", (item.parents || []).length ? (item.parents || []).flatMap((p, i) => [i ? " " : null, nodeButton(String(p))]) : h("span", { class: "muted" }, "(the start)")],
  ];
  if (merge) {
    rows.push(["merged", `${ffmt(item.inputs)} contexts into ${ffmt(item.outputs)}` + (item.errored ? `, ${ffmt(item.errored)} errored` : "")]);
  } else {
    rows.push(["agent type", String(item.agent_type)], ["category", item.category ?? "—"],
      ["split", Array.isArray(item.split) ? `${item.split[0]} of ${item.split[1]}` : "—"],
      ["model calls", ffmt(item.attempts)],
      ["grade", item.grade === true ? badge("passed ✓", "ok") : item.grade === false ? badge("failed ✗", "bad") : "—"],
      ["next", item.next ?? "— (the end)"],
      ["graph tokens", Array.isArray(item.symbols) && item.symbols.length ? h("code", {}, item.symbols.join(", ")) : "—"]);
  }
  const statusBadge = merge ? badge(item.errored ? `${item.errored} errored` : "merged", item.errored ? "bad" : "ok")
    : badge(item.status, item.status === "ok" ? "ok" : item.status === "error" ? "bad" : "unchecked");
  return [
    h("div", { class: "flow-detail-head" }, statusBadge, " ", h("strong", {}, String(item.agent)),
      merge ? ` merge ${item.inputs}↣${item.outputs}` : flowSplit(item) ? ` split ${flowSplit(item)}` : "",
      merge ? null : h("span", { class: "flow-detail-marks" }, ` ${flowMarks(item).join(" ")}`)),
    h("dl", { class: "msg-meta flow-meta" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    !merge && item.error ? h("pre", { class: "problems flow-error" }, `${item.error.type}: ${item.error.message}`) : null,
  ];
}

function flowStatValue(key, value) {
  if (typeof value !== "number") return value === null || value === undefined ? "—" : textOf(value);
  if (key === "cost") return `$${value.toFixed(4)}`;
  if (key.endsWith("_s")) return `${num(value, 3)} s`;
  if (key.endsWith("tps")) return num(value, 1);
  return ffmt(value);
}

function flowStats(end) {
  if (end.report_error) return h("div", { class: "error-box" }, `the statistics could not be read: ${end.report_error}`);
  const report = end.report;
  if (report === null || report === undefined) return h("p", { class: "muted" }, "No statistics were recorded.");
  if (typeof report !== "object" || Array.isArray(report)) return h("pre", { class: "flow-stats" }, json(report));
  const order = FLOW_STATS.filter(([k]) => k in report).concat(Object.keys(report).filter((k) => !FLOW_STATS.some(([s]) => s === k)).map((k) => [k, k.replace(/_/g, " ")]));
  return h("table", { class: "flow-stats" },
    h("tbody", {}, order.map(([k, label]) => h("tr", { dataset: { key: k } },
      h("th", { scope: "row" }, label), h("td", { class: "flow-stat" }, flowStatValue(k, report[k]))))));
}

function flowGraphStrings(graphs) {
  const list = h("ol", { class: "flow-graphs" });
  const add = (from, to) => {
    for (const g of graphs.slice(from, to)) {
      const code = h("code", { class: "flow-graph-string" });
      String(g).split(", ").forEach((token, i) => {
        if (i) code.appendChild(document.createTextNode(", "));
        code.appendChild(FLOW_MARKS.has(token) || /^\d+↣\d+$/.test(token) || token.startsWith("⇉")
          ? h("span", { class: `flow-token${token === "☢" || token === "✗" ? " bad" : token === "⚠" ? " warn" : ""}` }, token)
          : document.createTextNode(token));
      });
      list.appendChild(h("li", {}, code));
    }
  };
  add(0, FLOW_GRAPHS_SHOWN);
  if (graphs.length <= FLOW_GRAPHS_SHOWN) return list;
  const more = h("button", { type: "button", class: "flow-more" }, `show all ${ffmt(graphs.length)} graphs`);
  more.addEventListener("click", () => { more.remove(); add(FLOW_GRAPHS_SHOWN, graphs.length); });
  return h("div", {}, list, more);
}

function renderOneFlow(flow) {
  const steps = (Array.isArray(flow.steps) ? flow.steps : []).map((s) => ({ ...s, kind: "step" }));
  const merges = (Array.isArray(flow.merges) ? flow.merges : []).map((m) => ({ ...m, kind: "merge" }));
  const items = steps.concat(merges).sort((a, b) => a.seq - b.seq);
  const byNode = new Map(items.map((it) => [it.node, it]));
  const section = h("section", { class: "flow", dataset: { flow: flow.name, walk: flow.walk } });
  const count = (n, word) => `${ffmt(n)} ${word}${n === 1 ? "" : "s"}`;
  const errors = steps.filter((s) => s.status === "error").length;
  const skipped = steps.filter((s) => s.status === "skipped").length;
  const splits = steps.filter((s) => Array.isArray(s.split)).length;
  append(section, [
    h("h3", {}, "Flow ", h("span", { class: "flow-name" }, flow.name), flow.walk > 1 ? h("span", { class: "muted" }, ` · walk ${flow.walk}`) : null),
    h("p", { class: "muted flow-counts" }, [count(steps.length, "step"), count(merges.length, "merge"),
      splits ? count(splits, "split step") : null, errors ? count(errors, "error") : null,
      skipped ? `${ffmt(skipped)} skipped` : null].filter(Boolean).join(" · "),
      flow.end ? ` · ended with ${count(flow.end.contexts, "context")}` + (flow.end.errored ? `, ${ffmt(flow.end.errored)} errored` : "")
        : " · no flow.end: the walk is still running, or stopped before its end",
      items.length ? " · select a node (click, or Tab and Enter) for its span and events" : ""),
  ]);
  const detail = h("div", { class: "msg-detail flow-detail", hidden: true });
  if (items.length) {
    let selected = null;
    let drawn = null;
    const select = (id) => {
      const g = drawn.elements.get(id);
      const item = byNode.get(id);
      if (!g || !item) return;
      if (selected) selected.classList.remove("selected");
      selected = g;
      g.classList.add("selected");
      detail.hidden = false;
      append(clear(detail), flowDetail(item, byNode, select));
    };
    drawn = drawFlow(flow, items, select);
    append(section, [h("div", { class: "flow-scroll" }, drawn.svg), detail]);
  }
  if (flow.end) {
    const graphs = Array.isArray(flow.end.graphs) ? flow.end.graphs : [];
    append(section, [
      h("h4", {}, `Execution graph${graphs.length === 1 ? "" : "s"} `, h("span", { class: "muted" }, "(", eventLink(flow.end.seq, `flow.end #${flow.end.seq}`), ")")),
      graphs.length ? flowGraphStrings(graphs) : h("p", { class: "muted" }, "(no graphs recorded)"),
      h("h4", {}, "Statistics"), flowStats(flow.end),
    ]);
  }
  return section;
}

function flowLegend() {
  return h("div", { class: "flow-legend", id: "flow-legend" },
    h("span", { class: "flow-key status-ok" }, h("span", { class: "swatch" }), "ok"),
    h("span", { class: "flow-key status-error" }, h("span", { class: "swatch" }), "error"),
    h("span", { class: "flow-key status-skipped" }, h("span", { class: "swatch" }), "skipped"),
    h("span", { class: "flow-key" }, h("span", { class: "flow-cat-key" }, "M"), " category"),
    h("span", { class: "flow-key" }, "3/5 split · n↣m merge"),
    FLOW_GLYPHS.map(([g, word]) => h("span", { class: "flow-key" }, h("strong", {}, g), ` ${word}`)));
}

async function renderFlow(ctx, box) {
  const types = Object.keys((ctx.detail.summary || {}).event_types || {});
  if (!types.some((t) => t.startsWith("flow."))) return false;
  const doc = await api(`/api/runs/${encodeURIComponent(ctx.id)}/flow`);
  const flows = Array.isArray(doc.flows) ? doc.flows : [];
  const skipped = Array.isArray(doc.skipped) ? doc.skipped : [];
  if (!flows.length && !skipped.length) return false;
  if (flows.length) box.appendChild(flowLegend());
  for (const flow of flows) {
    try {
      box.appendChild(renderOneFlow(flow));
    } catch (err) {  // one flow that cannot be drawn does not hide the others
      showError(box, new Error(`flow ${flow && flow.name}: ${err && err.message ? err.message : err}`));
    }
  }
  if (skipped.length) {
    box.appendChild(h("details", { class: "flow-skipped", id: "flow-skipped", open: !flows.length },
      h("summary", { class: "problems" }, `${ffmt(skipped.length)} flow event${skipped.length === 1 ? "" : "s"} could not be read and ${skipped.length === 1 ? "is" : "are"} left out`),
      h("ul", {}, skipped.map((s) => h("li", { dataset: { seq: s.seq } },
        Number.isInteger(s.seq) ? eventLink(s.seq, `#${s.seq}`) : "?", ` ${s.type}`, s.flow ? ` (flow ${s.flow})` : "", `: ${s.reason}`)))));
  }
  return true;
}

registerPanel({ id: "flow", title: "Flow", order: 5, render: renderFlow });
