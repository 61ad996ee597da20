// RAR viewer: routing (loaded last).
"use strict";

// --- routing ---------------------------------------------------------------------------------

function main() {
  const root = document.getElementById("app");
  const match = OFFLINE ? [null, encodeURIComponent(OFFLINE.run.id)]
    : location.pathname.match(/^\/runs\/([^/]+)\/?$/);
  const page = match ? runPage(root, decodeURIComponent(match[1])) : runsPage(root);
  page.catch((err) => showError(root, err)).finally(() => { document.body.dataset.ready = "1"; });
}

main();
