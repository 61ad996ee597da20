// RAR viewer: diff.
"use strict";

// The diff page, /diff?a=RUN&b=RUN (placeholder until the full side-by-side view lands).
async function diffPage(root, a, b) {
  document.title = `Diff ${a} ↔ ${b} · RAR viewer`;
  clear(root);
  append(root, [h("p", {}, h("a", { href: "/" }, "← all runs")), h("h1", {}, `Diff ${a} ↔ ${b}`)]);
  try {
    const d = await api(`/api/diff?${new URLSearchParams({ a, b })}`);
    root.appendChild(h("pre", { id: "diff-raw" }, json(d)));
  } catch (err) {
    showError(root, err);
  }
}
