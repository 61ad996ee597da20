// RAR viewer: routing (loaded last).
"use strict";

// --- routing ---------------------------------------------------------------------------------

async function main() {
  const root = document.getElementById("app");
  try {
    await OFFLINE_READY;
  } catch (err) {
    showError(clear(root), err);
    document.body.dataset.ready = "1";
    return;
  }
  const match = OFFLINE ? [null, encodeURIComponent(OFFLINE.run.id)]
    : location.pathname.match(/^\/runs\/([^/]+)\/?$/);
  let page;
  const extra = OFFLINE ? null : PAGES.map((p) => [p, p.match(location.pathname)]).find(([, m]) => m);
  if (extra) page = extra[0].render(root, extra[1]);
  else if (match) page = runPage(root, decodeURIComponent(match[1]));
  else if (location.pathname.replace(/\/$/, "") === "/diff") {
    const params = new URLSearchParams(location.search);
    page = diffPage(root, params.get("a") || "", params.get("b") || "");
  } else page = runsPage(root);
  page.catch((err) => showError(root, err)).finally(() => { document.body.dataset.ready = "1"; });
}

main();
