// RAR viewer: the store's studies (/studies) and one study's report (/studies/{id}).
// The report is the one `rar study report STUDY` wrote (report.json): the viewer only reads it,
// since making it replays every run. Every value is inserted as text.
"use strict";

const STUDY_VIEW = (() => {
  const DASH = "–";

  function num(value, digits = 3) {
    if (value === null || value === undefined) return DASH;
    if (typeof value === "boolean") return value ? "yes" : "no";
    if (typeof value !== "number") return String(value);
    if (Number.isInteger(value)) return String(value);
    const size = Math.abs(value);
    if (size >= 1000 || (size > 0 && size < 0.001)) return value.toPrecision(digits);
    return String(Number(value.toFixed(digits)));
  }

  function share(value) {
    return value === null || value === undefined ? DASH : `${Math.round(value * 1000) / 10}%`;
  }

  function studyLink(id, label) {
    return h("a", { href: `/studies/${encodeURIComponent(id)}`, class: "study-link" }, label ?? id);
  }

  function diffLink(a, b, label) {
    return h("a", { href: `/diff?${new URLSearchParams({ a, b })}`, class: "diff-link" }, label || "diff");
  }

  function command(text) {
    return h("code", { class: "command" }, text);
  }

  // header: [key, label]; rows: arrays of cells (nodes or values); attrs per row via row.attrs
  function table(id, header, rows) {
    const head = h("thead", {}, h("tr", {}, header.map(([key, label]) => h("th", { dataset: { key } }, label))));
    const body = h("tbody", {}, rows.map((row) => h("tr", row.attrs || {},
      row.map((cell, i) => h("td", { dataset: { key: header[i][0] } }, cell instanceof Node ? cell : num(cell))))));
    return h("table", { id, class: "study-table" }, head, body);
  }

  function section(root, id, title, ...content) {
    append(root, [h("h2", { id }, title), ...content]);
  }

  async function listPage(root) {
    document.title = "Studies · RAR viewer";
    append(clear(root), [h("h1", {}, "Studies"), h("p", {}, h("a", { href: "/", id: "back-to-runs" }, "← all runs"))]);
    const { studies } = await api("/api/studies");
    if (!studies.length) {
      append(root, [h("p", { class: "muted", id: "no-studies" },
        "This store has no studies yet. Run one with ", command("rar study SPEC.yaml"),
        " (see docs/scale.md, Studies).")]);
      return;
    }
    const rows = studies.map((s) => {
      const row = [badge(s.status || "unknown"), studyLink(s.run_id, s.name || s.run_id), s.goal || "",
        s.created_at || "", s.cells,
        s.reported ? badge("reported", "ok") : h("span", { class: "muted" }, "no report: ", command(`rar study report ${s.run_id}`)),
        runLink(s.run_id)];
      row.attrs = { class: "study-row", dataset: { id: s.run_id } };
      return row;
    });
    append(root, [table("studies", [["status", "Status"], ["name", "Study"], ["goal", "Goal"],
      ["created_at", "Created"], ["cells", "Cells"], ["report", "Report"], ["id", "Run"]], rows)]);
  }

  function cellLabel(params) {
    if (!params) return "";
    if (params.kind === "flow") return String(params.entrypoint || "");
    return [params.mode, params.model, params.corpus].filter((v) => v !== undefined && v !== null).join(", ");
  }

  function replayCell(replay) {
    if (!replay) return DASH;
    const parts = [badge(replay.status || "unknown", replay.status === "reproducible" ? "ok" : "bad")];
    if (replay.replay_run) parts.push(" ", runLink(replay.replay_run));
    if (replay.error) parts.push(" ", h("span", { class: "muted" }, replay.error));
    return h("span", {}, parts);
  }

  function runCell(id) {
    return id ? runLink(id) : h("span", { class: "muted" }, "no run");
  }

  function errorText(error) {
    return error ? `${error.type || "error"}: ${error.message || ""}` : "";
  }

  function summary(root, study, report) {
    const counts = report ? report.counts : null;
    const dl = h("dl", { class: "summary", id: "study-summary" });
    const add = (label, value) => append(dl, [h("dt", {}, label), h("dd", {}, value)]);
    add("status", badge(study.status || "unknown"));
    add("study run", runLink(study.run_id));
    add("created", study.created_at || "");
    add("cells", counts
      ? `${counts.cells}: ${counts.completed} completed, ${counts.failed} failed, ${counts.missing} not run, ${counts.reused} reused`
      : String(study.cells ?? ""));
    if (report) {
      const replay = report.replay;
      add("replay", h("span", { id: "study-replay" }, badge(replay.all_reproducible ? "all reproducible" : "NOT all reproducible",
        replay.all_reproducible ? "ok" : "bad"), ` ${replay.reproducible} of ${replay.runs} runs replay reproducible`));
      add("study replay", replayCell(report.study.replay));
      add("audit pass rate", share(report.audit_pass_rate));
    }
    append(root, [dl]);
  }

  function groupsOf(report) {
    const names = new Map();
    report.groups.forEach((g, i) => names.set(g.key, `G${i + 1}`));
    return names;
  }

  function reportSections(root, report, doc) {
    const groups = report.groups;
    section(root, "sec-agreement", "Answer agreement across seeds",
      h("p", { class: "muted" }, "The share of a group's runs giving its most common answer, exactly and after " +
        "collapsing whitespace and rounding numbers to 4 significant digits; evidence: the mean Jaccard index of " +
        "the runs' anchor sets over every pair."),
      table("study-groups", [["group", "Group"], ["label", "Question / flow"], ["runs", "Runs"], ["failed", "Failed"],
        ["exact", "Exact"], ["normalised", "Normalised"], ["distinct", "Distinct answers"], ["evidence", "Evidence (Jaccard)"],
        ["audit", "Audit pass"], ["majority", "Majority run"]],
      groups.map((g, i) => Object.assign([`G${i + 1}`, g.label, g.runs, g.failed, share(g.agreement_exact),
        share(g.agreement_normalised), g.distinct_answers, num(g.evidence_jaccard), share(g.audit_pass_rate),
        g.majority_run ? runLink(g.majority_run) : DASH], { attrs: { class: "group-row", dataset: { key: g.key } } }))));

    figures(root, report, doc);

    const values = groups.flatMap((g, i) => Object.entries(g.values || {}).map(([name, v]) =>
      [`G${i + 1}`, name, v.n, v.mean, v.spread, v.stdev, v.cv]));
    if (values.length) {
      section(root, "sec-values", "Computed values",
        table("study-values", [["group", "Group"], ["quantity", "Quantity"], ["n", "n"], ["mean", "Mean"],
          ["spread", "Spread (max − min)"], ["stdev", "Stdev"], ["cv", "CV"]], values));
    }

    const dists = Object.entries(report.distributions || {}).map(([name, d]) =>
      Object.assign([name, d.n, d.min, d.median, d.mean, d.max], { attrs: { dataset: { name } } }));
    section(root, "sec-distributions", "Cost, tokens and latency",
      table("study-distributions", [["measure", ""], ["n", "n"], ["min", "Min"], ["median", "Median"],
        ["mean", "Mean"], ["max", "Max"]], dists));

    const names = groupsOf(report);
    const disagreeing = groups.flatMap((g) => (g.disagreeing || []).map((d) => Object.assign(
      [names.get(g.key), d.seed, runLink(d.run_id), h("span", { class: "study-answer" }, d.answer ?? ""),
        d.first_divergence || DASH, g.majority_run ? diffLink(g.majority_run, d.run_id, "diff with the majority run") : DASH],
      { attrs: { class: "disagreeing-row", dataset: { run: d.run_id } } })));
    section(root, "sec-disagreeing", "Runs disagreeing with the majority",
      disagreeing.length
        ? table("study-disagreeing", [["group", "Group"], ["seed", "Seed"], ["run", "Run"], ["answer", "Answer"],
          ["divergence", "First divergence"], ["diff", "Diff"]], disagreeing)
        : h("p", { class: "muted", id: "no-disagreeing" }, "Every run gives its group's majority answer (normalised)."));

    const majority = new Map(groups.map((g) => [g.key, g]));
    const differs = new Set(groups.flatMap((g) => (g.disagreeing || []).map((d) => d.run_id)));
    const cells = report.cells.map((c) => {
      const key = c.group;
      const group = majority.get(key);
      const diff = differs.has(c.run_id) && group && group.majority_run ? diffLink(group.majority_run, c.run_id) : "";
      return Object.assign([names.get(key) || DASH, c.params ? c.params.seed : DASH, cellLabel(c.params),
        badge(c.status || "unknown"), runCell(c.run_id), replayCell(c.replay),
        h("span", { class: "study-answer" }, c.answer ?? errorText(c.error)), c.audit_passed ?? DASH,
        c.cost, c.tokens, c.latency_s, diff],
      { attrs: { class: "cell-row", dataset: { digest: c.digest, run: c.run_id || "" } } });
    });
    section(root, "sec-cells", "Every run",
      table("study-cells", [["group", "Group"], ["seed", "Seed"], ["cell", "Cell"], ["status", "Status"], ["run", "Run"],
        ["replay", "Replay"], ["answer", "Answer"], ["audit", "Audit"], ["cost", "Cost"], ["tokens", "Tokens"],
        ["latency", "Latency s"], ["diff", "Diff"]], cells));
  }

  // the report's figures as rar study report drew them (SVG shown, PNG to download); an <img>
  // runs no script, and the server answers them under the artifacts' policy as well
  function figures(root, report, doc) {
    const names = new Set(doc.figures || []);
    const base = `/api/studies/${encodeURIComponent(doc.id)}/figures/`;
    const shown = [["agreement", "Answer agreement and evidence overlap per group"],
      ["distributions", "Cost, tokens and latency of every finished run"]]
      .filter(([stem]) => names.has(`${stem}.svg`) || names.has(`${stem}.png`))
      .map(([stem, caption]) => {
        const file = names.has(`${stem}.svg`) ? `${stem}.svg` : `${stem}.png`;
        const links = [`${stem}.svg`, `${stem}.png`].filter((n) => names.has(n))
          .map((n) => h("a", { href: base + n, download: n, class: "figure-file" }, n));
        return h("figure", { class: "study-figure", id: `study-figure-${stem}` },
          h("img", { src: base + file, alt: caption }),
          h("figcaption", {}, caption, " (", ...links.flatMap((a, i) => (i ? [", ", a] : [a])), ")"));
      });
    if (shown.length) section(root, "sec-figures", "Figures", ...shown);
  }

  function recordedCells(root, doc) {
    const box = h("div", { class: "error-box no-report", id: "no-report" },
      "This study has no report yet. Make one with ", command(doc.command),
      " (it replays every run strictly, offline, and writes report.json where this page reads it); then reload.");
    append(root, [box]);
    if (doc.report_error) append(root, [h("p", { class: "problems", id: "report-error" }, doc.report_error)]);
    section(root, "sec-cells", "Cells as recorded",
      table("study-cells", [["seed", "Seed"], ["cell", "Cell"], ["status", "Status"], ["run", "Run"], ["reused", "Reused"],
        ["error", "Error"]],
      (doc.cells || []).map((c) => Object.assign([c.params ? c.params.seed : DASH, c.params && c.params.kind === "flow"
        ? cellLabel(c.params) : `${c.params ? c.params.question || "" : ""} [${cellLabel(c.params)}]`,
      badge(c.status || "unknown"), runCell(c.run_id), c.reused ?? DASH, errorText(c.error)],
      { attrs: { class: "cell-row", dataset: { digest: c.digest, run: c.run_id || "" } } }))));
  }

  async function studyPage(root, ref) {
    document.title = "Study · RAR viewer";
    clear(root);
    const doc = await api(`/api/studies/${encodeURIComponent(ref)}`);
    const study = doc.study;
    document.title = `Study ${study.name || study.run_id} · RAR viewer`;
    append(root, [h("p", {}, h("a", { href: "/studies", id: "back-to-studies" }, "← all studies")),
      h("h1", {}, `Study ${study.name || study.run_id}`), h("p", { class: "muted" }, study.goal || "")]);
    summary(root, study, doc.report);
    if (doc.report) reportSections(root, doc.report, doc);
    else recordedCells(root, doc);
  }

  return { listPage, studyPage };
})();

PAGES.push({ match: (path) => (path.replace(/\/$/, "") === "/studies" ? [] : null), render: (root) => STUDY_VIEW.listPage(root) });
PAGES.push({ match: (path) => path.match(/^\/studies\/([^/]+)\/?$/), render: (root, m) => STUDY_VIEW.studyPage(root, decodeURIComponent(m[1])) });

// A study's own run page links its study page (not in an exported page: it has no study pages).
registerPanel({
  id: "study", title: "Study", order: 1, render: (ctx, box) => {
    const tags = (ctx.detail.manifest || {}).tags || {};
    if (OFFLINE || tags.kind !== "study" || tags.replay_of) return false;
    append(box, [h("p", {}, "This run is a study: ", h("a", { href: `/studies/${encodeURIComponent(ctx.id)}`, id: "study-page-link" },
      "its cells, agreement and replay report"), ".")]);
    return true;
  },
});
