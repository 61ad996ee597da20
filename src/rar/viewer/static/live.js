// RAR viewer: a run being written, followed live — what the agents are doing as it is recorded
// (Contract Net rounds, searches, sandbox cells, audits, model calls), then the answer once the
// run finishes. Read-only: it only reads the events API, like the rest of the run page.
"use strict";

const PROGRESS_MS = 700;

// The progress box of a live run: one line per round, search, sandbox cell and audit, in the
// order they happen, under counters. onFinish(finishedEvent) is called once, when the
// run.finished event arrives; stop() ends the polling.
function liveProgress(runId, onFinish) {
  const counts = h("div", { class: "progress-counts", id: "progress-counts" });
  const list = h("ol", { class: "progress-list", id: "progress-list" });
  const box = h("section", { class: "progress", id: "run-progress", "aria-live": "polite" },
    h("h2", { id: "sec-progress" }, "Progress"), counts, list);
  const seen = { rounds: 0, searches: 0, cells: 0, audits: 0, llm: 0 };
  const roundSpans = new Map();  // span of a Contract Net round → its name
  const rounds = new Map();      // conversation id → { item, state }
  let offset = 0;
  let timer = null;
  let finished = false;

  function item(kind, ...content) {
    const el = h("li", { class: `progress-item p-${kind}`, dataset: { kind } }, ...content);
    list.appendChild(el);
    return el;
  }
  function at(seq) {
    return h("span", { class: "muted" }, "(", eventLink(seq, `event #${seq}`), ")");
  }
  function later(el, promise, render) {
    promise.then((value) => append(el, [render(value)])).catch(() => {});
  }
  function showCounts() {
    const bits = [
      [seen.rounds, "Contract Net round"], [seen.searches, "search"], [seen.cells, "sandbox cell"],
      [seen.audits, "audit"], [seen.llm, "model call"],
    ].map(([n, word]) => `${n} ${word}${n === 1 ? "" : word.endsWith("h") ? "es" : "s"}`);
    counts.textContent = bits.join(" · ");
  }
  function round(ev) {
    const key = ev.conversation_id || ev.span;
    let entry = rounds.get(key);
    if (!entry) {
      seen.rounds += 1;
      const name = roundSpans.get(ev.span) || String(ev.span || "").split("/").pop().replace(/#\d+$/, "");
      const text = h("span", { class: "round-text" });
      entry = { state: { name, cfp: [], bids: 0, award: null, rejected: 0, report: null }, text,
        el: item("round", badge("Contract Net", "perf"), " ", text, " ", at(ev.seq)) };
      rounds.set(key, entry);
    }
    const s = entry.state;
    if (ev.performative === "CFP") s.cfp = ev.receivers || [];
    else if (ev.performative === "BID") s.bids += 1;
    else if (ev.performative === "AWARD") s.award = (ev.receivers || [])[0] || "?";
    else if (ev.performative === "REJECT") s.rejected += 1;
    else if (ev.performative === "REPORT") s.report = ev.sender;
    let text = `${s.name}: call for proposals to ${s.cfp.join(", ") || "…"}`;
    if (s.bids) text += ` · ${s.bids} bid${s.bids > 1 ? "s" : ""}`;
    if (s.award) text += ` · awarded to ${s.award}`;
    if (s.report) text += ` · ${s.report} reported`;
    entry.text.textContent = text;
  }
  async function tool(ev) {
    const request = await payloadValue(runId, ev, "request").catch(() => null);
    const name = request && typeof request === "object" ? request.name : null;
    if (name === "search") {
      seen.searches += 1;
      const query = request.args && request.args.query !== undefined ? String(request.args.query) : "";
      const el = item("search", badge("search", "perf"), ` “${query}” `, at(ev.seq));
      if (ev.result) {
        later(el, payloadValue(runId, ev, "result"), (r) => h("span", { class: "muted" },
          ` → ${Array.isArray(r && r.anchors) ? r.anchors.length : "?"} passages`));
      }
    } else if (name === "python") {
      seen.cells += 1;
      const el = item("cell", badge("sandbox cell", "perf"), ` ${seen.cells} `, at(ev.seq));
      if (ev.error) append(el, [" ", badge("error", "bad")]);
      else if (ev.result) {
        later(el, payloadValue(runId, ev, "result"), (r) => {
          const status = r && r.status ? String(r.status) : "?";
          return h("span", {}, " ", badge(status, status === "ok" ? "ok" : "bad"),
            typeof (r && r.duration_ms) === "number" ? h("span", { class: "muted" }, ` ${fmt(Math.round(r.duration_ms))} ms`) : null);
        });
      }
    }
  }
  function audit(ev) {
    seen.audits += 1;
    const el = item("audit", badge("audit", "perf"), ` ${ev.stage || ""} `, at(ev.seq));
    if (ev.report) {
      later(el, payloadValue(runId, ev, "report"), (r) => h("span", {}, " ",
        r && r.passed === true ? badge("passed", "ok") : r && r.passed === false ? badge("not passed", "bad") : badge("?", "unchecked")));
    }
  }
  async function take(events) {
    for (const ev of events) {
      if (ev.type === "span.start" && ev.attributes && ev.attributes.protocol === "fipa-contract-net") {
        roundSpans.set(ev.span, ev.name);
      } else if (ev.type === "message" && ev.protocol === "fipa-contract-net") round(ev);
      else if (ev.type === "effect" && ev.kind === "llm") seen.llm += 1;
      else if (ev.type === "effect" && ev.kind === "tool") await tool(ev);
      else if (ev.type === "audit") audit(ev);
      else if (ev.type === "run.finished" && !finished) {
        finished = true;
        item("finish", badge(ev.status || "finished"), " the run finished ", at(ev.seq));
        showCounts();
        stop();
        onFinish(ev);
        return;
      }
    }
    showCounts();
  }
  async function poll() {
    try {
      const page = await api(`/api/runs/${encodeURIComponent(runId)}/events?offset=${offset}&limit=1000`);
      offset = page.offset + page.events.length;
      await take(page.events);
      if (!finished) timer = setTimeout(poll, page.next_offset !== null ? 0 : PROGRESS_MS);
    } catch (err) {
      append(counts, [" ", badge("stopped following", "unchecked"), ` ${err.message || err}`]);
    }
  }
  function stop() { if (timer) clearTimeout(timer); timer = null; }
  showCounts();
  poll();
  return { box, stop };
}
