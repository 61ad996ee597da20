"""A recorded run as ONE self-contained HTML file: the viewer's run page and replay player,
working offline from ``file://``.

The viewer's CSS and JavaScript are inlined; the run's data (what ``/api/runs/{id}`` and
``/api/runs/{id}/events`` would answer, plus the plain value of every payload reference the page
may open) is embedded in ``<script type="application/json" id="rar-data">``. The viewer's scripts read it
from there instead of fetching. The embedded JSON has ``<``, ``>`` and ``&`` escaped as
``\\u003c``, ``\\u003e`` and ``\\u0026``, so no recorded text can close the tag; the page renders
every recorded value as text, as the served viewer does.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from rar.errors import RarError

PAYLOAD_CAP = 256 * 1024
"""Bytes of JSON kept per payload; a bigger value becomes its cut text with a note."""

# the values the page needs whole (the answer and its anchors drive the evidence chain)
_UNCAPPED = {("run.finished", "result"), ("evidence", "anchors")}


def _static_dir() -> Path:
    from rar.viewer.app import STATIC_DIR

    return Path(STATIC_DIR)


def _is_ref(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("digest"), str)
        and value["digest"].startswith("sha256:")
        and "size" in value
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _capped(value: Any, cap: int) -> Any:
    text = json.dumps(value, ensure_ascii=False, default=str, indent=2)
    raw = text.encode("utf-8")
    if len(raw) <= cap:
        return value
    cut = raw[:cap].decode("utf-8", errors="ignore")
    return f"{cut}\n… [cut by rar export: {len(raw)} bytes of JSON, the first {cap} shown]"


def export_data(store: Any, run_id: str, *, cap: int = PAYLOAD_CAP) -> dict[str, Any]:
    """The data embedded in the page: ``run``, ``events`` (a page like the API's) and
    ``payloads`` (``"seq:field"`` → plain value, or ``{"error": ...}`` when it cannot be read)."""
    from rar.viewer.app import Viewer, build_run_detail

    detail, log = build_run_detail(Viewer(Path(store.root)), store, run_id)
    payloads: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for event in log.events:
        seq = event.get("seq")
        for field, ref in event.items():
            if not _is_ref(ref) or ("value" in ref and not isinstance(ref["value"], (dict, list))):
                continue  # inline scalars are read from the event itself
            key = f"{seq}:{field}"
            try:
                value = store.resolve_payload(ref)
            except RarError as exc:
                errors[key] = exc.message
                continue
            except (ValueError, KeyError, OSError) as exc:
                errors[key] = f"cannot read payload: {exc}"
                continue
            if (event.get("type"), field) not in _UNCAPPED:
                value = _capped(value, cap)
            payloads[key] = value
    return {
        "format": "rar-html-export/1",
        "run": detail,
        "events": {
            "id": run_id,
            "offset": 0,
            "limit": len(log.events),
            "total": len(log.events),
            "complete": log.complete,
            "problems": log.problems,
            "next_offset": None,
            "events": log.events,
        },
        "payloads": payloads,
        "payload_errors": errors,
    }


def embed_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` left raw."""
    return (
        _dumps(data)
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _inline_code(text: str, tag: str) -> str:
    # the viewer's own code: make sure it cannot end its element early
    return text.replace(f"</{tag}", f"<\\/{tag}")


def render_html(data: dict[str, Any]) -> str:
    static = _static_dir()
    from rar.viewer.app import SCRIPTS, STYLES

    css = "\n".join(
        _inline_code((static / name).read_text(encoding="utf-8"), "style") for name in STYLES
    )
    # classic scripts at the end of <body>, in the viewer's load order (inline scripts cannot
    # be deferred)
    js = "".join(
        f"<script>\n{_inline_code((static / name).read_text(encoding='utf-8'), 'script')}\n"
        "</script>\n"
        for name in SCRIPTS
    )
    icon = base64.b64encode((static / "favicon.svg").read_bytes()).decode("ascii")
    run_id = str(data["run"]["id"])
    title = (
        f"Run {run_id} · RAR export".replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>
{css}
</style>
<link rel="icon" href="data:image/svg+xml;base64,{icon}" type="image/svg+xml">
<script type="application/json" id="rar-data">{embed_json(data)}</script>
</head>
<body>
<header class="top"><span class="brand">RAR viewer</span> \
<span class="muted">offline export of one run</span></header>
<main id="app"><p class="muted" id="loading">Loading…</p></main>
<noscript><p>This exported run needs JavaScript to display.</p></noscript>
{js}</body>
</html>
"""


def export_html(store: Any, run_id: str, *, cap: int = PAYLOAD_CAP) -> str:
    """The run ``run_id`` of ``store`` as one self-contained HTML document."""
    return render_html(export_data(store, run_id, cap=cap))
