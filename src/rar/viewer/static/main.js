// RAR viewer: routing (loaded last).
"use strict";

// --- routing ---------------------------------------------------------------------------------

function main() {
  const root = document.getElementById("app");
  const match = OFFLINE ? [null, encodeURIComponent(OFFLINE.run.id)]
    : location.pathname.match(/^\/runs\/([^/]+)\/?$/);
  let page;
  if (match) page = runPage(root, decodeURIComponent(match[1]));
  else if (location.pathname.replace(/\/$/, "") === "/diff") {
    const params = new URLSearchParams(location.search);
    page = diffPage(root, params.get("a") || "", params.get("b") || "");
  } else page = runsPage(root);
  page.catch((err) => showError(root, err)).finally(() => { document.body.dataset.ready = "1"; });
}

main();
