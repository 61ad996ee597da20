// RAR viewer: starting runs from the page. Loaded only by `rar view --allow-runs` (never by the
// read-only viewer, never in an exported page): the New run page, a job's page, and the run
// page's Replay, Branch, Compare and Resume controls. Every request that changes anything is a
// POST carrying the page's token (X-RAR-Token, from <meta name="rar-token">); the server checks
// it, and the request's origin, before anything else.
"use strict";

const RUN_TOKEN = (document.querySelector('meta[name="rar-token"]') || {}).content || "";
const EXAMPLE_QUESTION = "What activation energy do the Kissinger DSC data in the corpus give?";
const JOB_POLL_MS = 300;
const QUEUE_POLL_MS = 1000;
let CONTROL_INFO = null;  // GET /api/control, asked once
let CURRENT_RUN = null;   // the run page's detail, for the branch dialog

function controlInfo() {
  if (!CONTROL_INFO) CONTROL_INFO = api("/api/control");
  return CONTROL_INFO;
}

async function post(path, body) {
  const answer = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json", "X-RAR-Token": RUN_TOKEN },
    body: JSON.stringify(body || {}),
  });
  let data = null;
  try {
    data = await answer.json();
  } catch (err) {
    throw new Error(`${path}: HTTP ${answer.status}, not JSON`);
  }
  if (!answer.ok) {
    const error = new Error(data.message || `HTTP ${answer.status}`);
    error.code = data.error;
    throw error;
  }
  return data;
}

function problemBox(id) {
  return h("div", { class: "error-box", id, role: "alert", hidden: true });
}

function showProblem(box, err) {
  box.hidden = false;
  append(clear(box), [err && err.code ? h("strong", { class: "error-code" }, `${err.code}: `) : null,
    String(err && err.message ? err.message : err)]);
}

function jobBadge(job) {
  const kinds = { queued: "pending", running: "running", done: "ok", failed: "failed", cancelled: "unchecked" };
  const text = job.status === "queued" && job.position ? `queued (#${job.position})` : job.status;
  const el = badge(text, kinds[job.status] || "unchecked");
  el.classList.add("job-status");
  el.dataset.status = job.status;
  return el;
}

// Start a job; go to its page, which goes on to the run's page once the run exists.
async function startJob(path, body, problem, button) {
  if (button) button.disabled = true;
  if (problem) problem.hidden = true;
  try {
    const answer = await post(path, body);
    location.href = answer.url;
  } catch (err) {
    if (problem) showProblem(problem, err);
    if (button) button.disabled = false;
  }
}

// --- the queue -------------------------------------------------------------------------------

function queueSection() {
  const table = h("table", { id: "jobs-table", class: "jobs" },
    h("thead", {}, h("tr", {}, ["Status", "Job", "Run", "Queued at", ""].map((t) => h("th", {}, t)))),
    h("tbody"));
  const info = h("p", { class: "muted", id: "jobs-info" });
  const section = h("section", { id: "jobs" }, h("h2", { id: "sec-jobs" }, "Queue"), info, table);
  let timer = null;
  async function refresh() {
    let answer;
    try {
      answer = await api("/api/jobs");
    } catch (err) {
      info.textContent = String(err.message || err);
      return;
    }
    info.textContent = `${answer.running} running, ${answer.queued} waiting; ${answer.parallel} at a time` +
      (answer.jobs.length ? "" : " — nothing asked yet");
    const body = clear(table.querySelector("tbody"));
    for (const job of answer.jobs) {
      const cancel = !["done", "failed", "cancelled"].includes(job.status)
        ? h("button", { type: "button", class: "job-cancel" }, job.status === "running" ? "Stop" : "Cancel") : null;
      if (cancel) cancel.addEventListener("click", () => post(`/api/jobs/${encodeURIComponent(job.id)}/cancel`).then(refresh, refresh));
      body.appendChild(h("tr", { class: "job-row", dataset: { id: job.id, status: job.status } },
        h("td", {}, jobBadge(job)),
        h("td", { class: "goal" }, h("a", { href: `/jobs/${encodeURIComponent(job.id)}` }, job.title),
          job.error ? h("div", { class: "problems" }, `${job.error.type}: ${job.error.message}`) : null),
        h("td", {}, job.run_id ? runLink(job.run_id) : "—", job.run_status ? [" ", badge(job.run_status)] : null,
          job.replay_status ? [" ", replayBadge(job.replay_status)] : null),
        h("td", { class: "muted" }, job.created_at || ""),
        h("td", {}, cancel)));
    }
    const busy = answer.jobs.some((j) => j.status === "queued" || j.status === "running");
    timer = setTimeout(refresh, busy ? QUEUE_POLL_MS : QUEUE_POLL_MS * 3);
  }
  refresh();
  return { section, stop: () => clearTimeout(timer) };
}

// --- the New run page ------------------------------------------------------------------------

function field(label, input, help) {
  return h("div", { class: "field" }, h("label", { for: input.id }, label), input,
    help ? h("div", { class: "muted help" }, help) : null);
}

async function newRunPage(root) {
  document.title = "New run · RAR viewer";
  clear(root);
  const info = await controlInfo();
  const question = h("textarea", { id: "new-question", rows: 3, maxlength: 4000, required: true,
    placeholder: EXAMPLE_QUESTION, "aria-label": "question" });
  const example = h("a", { href: "#", id: "new-example" }, "use the example question");
  example.addEventListener("click", (e) => { e.preventDefault(); question.value = EXAMPLE_QUESTION; question.focus(); });
  const mode = h("select", { id: "new-mode" }, info.modes.map((m) => h("option", { value: m }, m)));
  const corpus = h("select", { id: "new-corpus" }, info.corpora.map((c) => h("option", { value: c.name }, c.label)));
  const models = h("datalist", { id: "new-models" },
    [info.default_model, "auto", ...(info.profiles || []), "openai:gpt-4o-mini", "gemini:gemini-2.5-flash",
      "anthropic:claude-sonnet-4-5"].map((m) => h("option", { value: m })));
  const model = h("input", { id: "new-model", type: "text", list: "new-models", value: info.default_model,
    spellcheck: "false", autocomplete: "off" });
  const seed = h("input", { id: "new-seed", type: "number", step: "1", value: "0" });
  const submit = h("button", { type: "submit", id: "new-submit", class: "primary" }, "Ask");
  const problem = problemBox("new-error");
  const form = h("form", { id: "new-run-form", class: "run-form" },
    field("Question", question, [example, " — the agents answer it over the corpus, with every claim cited"]),
    h("div", { class: "field-row" },
      field("Mode", mode, "how much evidence each claim needs"),
      field("Corpus", corpus, info.root ? "the demo corpus, or a directory under the corpus root"
        : "start rar view --allow-runs --corpus-root DIR to offer your own"),
      field("Model", model, "planner:rule-based runs offline; provider:model or a profile uses a real model"),
      field("Seed", seed, "fixes the run's randomness and ids")),
    models, h("div", { class: "controls" }, submit), problem);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    startJob("/api/runs", { question: question.value, mode: mode.value, corpus: corpus.value,
      model: model.value.trim(), seed: seed.value === "" ? 0 : seed.value }, problem, submit);
  });
  const queue = queueSection();
  append(root, [h("p", {}, h("a", { href: "/" }, "← all runs")), h("h1", {}, "New run"), form, queue.section]);
  if (location.hash === "#jobs") queue.section.scrollIntoView();
  else question.focus();
}

// --- a job's page: waits for the run to exist, then opens it ------------------------------------

async function jobPage(root, jobId) {
  document.title = `Job ${jobId} · RAR viewer`;
  const title = h("h1", { id: "job-title" }, `Job ${jobId}`);
  const state = h("p", { id: "job-state" }, h("span", { class: "muted" }, "…"));
  const cancel = h("button", { type: "button", id: "job-cancel", hidden: true }, "Cancel");
  const problem = problemBox("job-error");
  const more = h("p", { id: "job-more" });
  append(clear(root), [h("p", {}, h("a", { href: "/" }, "← all runs"), " · ", h("a", { href: "/new" }, "new run")),
    title, state, cancel, problem, more]);
  cancel.addEventListener("click", () => post(`/api/jobs/${encodeURIComponent(jobId)}/cancel`).catch((err) => showProblem(problem, err)));
  for (;;) {
    let job;
    try {
      job = (await api(`/api/jobs/${encodeURIComponent(jobId)}`)).job;
    } catch (err) {
      showProblem(problem, err);
      return;
    }
    title.textContent = job.title;
    const words = { queued: job.position > 1 ? `waiting: ${job.position - 1} job${job.position > 2 ? "s" : ""} before it`
      : "waiting for the job before it", running: "starting the run…", done: "done", failed: "failed", cancelled: "cancelled" };
    append(clear(state), [jobBadge(job), " ", words[job.status] || job.status]);
    cancel.hidden = !(job.status === "queued" || job.status === "running");
    cancel.textContent = job.status === "running" ? "Stop" : "Cancel";
    if (job.run_id && (job.status === "running" || job.status === "done")) {  // its page follows it live
      location.replace(`/runs/${encodeURIComponent(job.run_id)}`);
      return;
    }
    if (["done", "failed", "cancelled"].includes(job.status)) {
      if (job.error) showProblem(problem, { code: job.error.type, message: job.error.message });
      clear(more);
      if (job.run_id) append(more, ["The run: ", runLink(job.run_id)]);
      if (job.source_run) append(more, [job.run_id ? " · " : "", "back to ", runLink(job.source_run)]);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, JOB_POLL_MS));
  }
}

// --- the run page's controls -------------------------------------------------------------------

function lastSeq(detail) {
  return Number(detail.summary && detail.summary.events) || 0;
}

CONTROLS.runActions = (box, detail) => {
  CURRENT_RUN = detail;
  clear(box);
  box.hidden = false;
  const id = detail.id;
  const manifest = detail.manifest || {};
  const running = detail.status === "running";
  const replayable = Boolean(manifest.entrypoint);
  const problem = problemBox("action-error");
  const why = running ? "the run is still being written" : !replayable ? "the run records no entrypoint" : null;
  const replay = h("button", { type: "button", id: "action-replay", class: "primary", disabled: Boolean(why),
    title: why || "re-execute this run offline, strictly, against its record: is it reproducible?" }, "Replay");
  replay.addEventListener("click", () => startJob(`/api/runs/${encodeURIComponent(id)}/replay`, {}, problem, replay));
  const branch = h("button", { type: "button", id: "action-branch", disabled: Boolean(why),
    title: why || "replay up to an event, then go live with a change (mode, seed or model)" }, "Branch…");
  branch.addEventListener("click", () => openBranch(id, 0, lastSeq(detail), null));
  const parent = detail.summary && detail.summary.parent;
  const compare = parent ? h("a", { id: "action-compare", class: "button",
    href: `/diff?${new URLSearchParams({ a: parent, b: id })}` }, "Compare with parent") : null;
  let resume = null;
  if (detail.status === "waiting" || detail.status === "interrupted") {
    const now = h("input", { type: "checkbox", id: "action-resume-now" });
    const button = h("button", { type: "button", id: "action-resume", class: "primary",
      title: "continue the run in place: the recorded part is replayed, then it goes live" }, "Resume");
    button.addEventListener("click", () => startJob(`/api/runs/${encodeURIComponent(id)}/resume`, { now: now.checked }, problem, button));
    resume = [button, detail.status === "waiting" ? h("label", { class: "muted" }, now, " before its deadline") : null];
  }
  append(box, [h("span", { class: "actions-label" }, "Actions"), replay, branch, compare, resume,
    why && !running ? h("span", { class: "muted" }, `(${why}: it cannot be replayed or branched from here)`) : null,
    problem]);
};

CONTROLS.eventRow = (head, ev, runId) => {
  const button = h("button", { type: "button", class: "branch-here",
    title: `branch here: replay up to event #${ev.seq - 1}, then event #${ev.seq} and what follows go live with a change` }, "↱ branch");
  button.addEventListener("click", (e) => {
    e.stopPropagation();
    openBranch(runId, Number(ev.seq) - 1, null, `event #${ev.seq}`);
  });
  head.appendChild(button);
};

CONTROLS.playerControls = (controls, currentStep, runId, events) => {
  const button = h("button", { type: "button", id: "player-branch", title: "branch the run at the step shown" }, "↱ Branch at this step");
  button.addEventListener("click", () => {
    const step = currentStep();
    const last = Number((events[events.length - 1] || {}).seq || 0);
    if (step && step.ev) openBranch(runId, Number(step.ev.seq) - 1, last, `the ${step.kind} of event #${step.ev.seq}`);
    else openBranch(runId, last, last, "the answer");
  });
  controls.appendChild(button);
};

// The branch dialog: events up to `at` (editable, 0 to the run's last event) are replayed from
// the record, then the new run goes live with one controlled change; `where` names the step
// the page branches at (the first event that goes live).
async function openBranch(runId, at, last, where) {
  const info = await controlInfo();
  const old = document.getElementById("branch-dialog");
  if (old) old.remove();
  const detail = CURRENT_RUN && CURRENT_RUN.id === runId ? CURRENT_RUN : { manifest: {} };
  const config = (detail.manifest || {}).config || {};
  const key = h("select", { id: "branch-key" }, info.branch_changes.map((k) => h("option", { value: k }, k)));
  const valueBox = h("span", { id: "branch-value-box" });
  let value = null;
  function valueInput() {
    if (key.value === "mode") {
      value = h("select", { id: "branch-value" }, info.modes.map((m) => h("option", { value: m }, m)));
      const other = info.modes.find((m) => m !== config.mode);
      if (other) value.value = other;
    } else if (key.value === "seed") {
      value = h("input", { id: "branch-value", type: "number", step: "1", value: String(Number(config.seed || 0) + 1) });
    } else {
      value = h("input", { id: "branch-value", type: "text", list: "new-models", value: String(config.model || info.default_model) });
    }
    append(clear(valueBox), [value]);
  }
  key.addEventListener("change", valueInput);
  valueInput();
  const start = h("button", { type: "submit", id: "branch-start", class: "primary" }, "Start the branch");
  const cancel = h("button", { type: "button", id: "branch-cancel" }, "Cancel");
  const problem = problemBox("branch-error");
  const upTo = h("input", { id: "branch-at", type: "number", min: "0", step: "1", value: String(at) });
  if (last !== null && last !== undefined) upTo.max = String(last);
  const explain = h("p", { class: "muted", id: "branch-explain" });
  const say = () => {
    const k = Number(upTo.value);
    explain.textContent = k > 0
      ? `Events 1 to ${k} of run ${runId} are replayed from the record; from event #${k + 1} on, the new run goes live with the change.`
      : `Nothing is replayed: the new run goes live from its start with the change, and names run ${runId} as its parent.`;
  };
  upTo.addEventListener("input", say);
  say();
  const form = h("form", { method: "dialog", class: "run-form" },
    h("h2", { id: "branch-title" }, where ? `Branch at ${where}` : `Branch run ${runId}`),
    h("div", { class: "controls" }, h("label", { for: "branch-at" }, "replay up to event"), upTo), explain,
    h("div", { class: "controls" }, h("label", { for: "branch-key" }, "change"), key, h("span", {}, "="), valueBox),
    h("div", { class: "controls" }, start, cancel), problem);
  const dialog = h("dialog", { id: "branch-dialog" }, form);
  cancel.addEventListener("click", () => dialog.close());
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    startJob(`/api/runs/${encodeURIComponent(runId)}/branch`,
      { at: Number(upTo.value), set: { [key.value]: value.value } }, problem, start);
  });
  document.body.appendChild(dialog);
  dialog.showModal();
}

// the run list: where to start
CONTROLS.runsPage = (root) => {
  const none = document.getElementById("no-runs");
  if (none) append(none, [" Or ask a question here: ", h("a", { href: "/new", id: "no-runs-new" }, "New run"), "."]);
};

PAGES.push({ match: (path) => (path.replace(/\/$/, "") === "/new" ? [] : null), render: (root) => newRunPage(root) });
PAGES.push({ match: (path) => path.match(/^\/jobs\/([^/]+)\/?$/), render: (root, m) => jobPage(root, decodeURIComponent(m[1])) });
