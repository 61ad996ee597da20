"""A recorded run as ONE self-contained HTML file: the viewer's run page and replay player,
working offline from ``file://``.

The viewer's CSS and scripts are inlined. The run's data is embedded as one JSON document
(format ``rar-html-export/2``):

* ``run`` — what ``/api/runs/{id}`` answers (summary, verification, and whether each cited
  passage still matched its content hash when the page was exported);
* ``events`` — the run's events as stored, payload fields left as references;
* ``blobs`` — ``digest → JSON value`` for every blob those references need, each stored once. A
  conversation is kept in its linked form (``{"$chain": head, "length": n}`` over message and
  node blobs, see :mod:`rar.store.payloads`), and the page un-links it when a payload is opened,
  so a long conversation costs linear space here too. A blob of more than ``cap`` bytes is
  replaced by ``{"$cut": text}``: its first ``cap`` bytes and a note;
* ``artifacts`` — ``name → {url, media_type, size, digest}`` for the run's pictures, as
  ``data:`` URLs (read from the verified blob, not from the artifacts folder);
* ``payload_errors`` — why a blob could not be read, per digest.

A small document is embedded as JSON in ``<script type="application/json" id="rar-data">`` with
``<``, ``>`` and ``&`` escaped as ``\\u003c``, ``\\u003e`` and ``\\u0026`` (no recorded text can
close the tag). Above :data:`COMPRESS_ABOVE` bytes it is gzip-compressed and base64-encoded into
``<script type="application/octet-stream" id="rar-data-gz">`` and the page inflates it with the
browser's ``DecompressionStream``. Either way the page renders every recorded value as text, as
the served viewer does.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from rar.errors import RarError

FORMAT = "rar-html-export/2"
PAYLOAD_CAP = 256 * 1024
"""Bytes of JSON kept per blob; a bigger one becomes its cut text with a note."""
COMPRESS_ABOVE = 1 << 20
"""Embedded JSON bigger than this (bytes) is stored gzip-compressed and base64-encoded."""
PICTURE_CAP = 8 << 20
"""Pictures bigger than this are left out of the page (named, with a note)."""
PICTURE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml"})

# the values the page needs whole (the answer and its anchors drive the evidence chain)
_WHOLE = {("run.finished", "result"), ("evidence", "anchors")}
_CHAIN = "$chain"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_PLAIN_RE = re.compile(r'<script type="application/json" id="rar-data">(.*?)</script>', re.S)
_GZ_RE = re.compile(
    r'<script type="application/octet-stream" id="rar-data-gz">([A-Za-z0-9+/=\s]*)</script>'
)


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


def _cut(raw: bytes, cap: int) -> dict[str, str]:
    try:
        text = json.dumps(orjson.loads(raw), ensure_ascii=False, indent=2)
    except orjson.JSONDecodeError:
        text = raw.decode("utf-8", errors="replace")
    data = text.encode("utf-8")
    shown = data[:cap].decode("utf-8", errors="ignore")
    return {
        "$cut": f"{shown}\n… [cut by rar export: {len(raw)} bytes of JSON, the first {cap} shown]"
    }


class _Blobs:
    """Collects every blob a set of payload references needs, each once."""

    def __init__(self, store: Any, cap: int) -> None:
        self.store = store
        self.cap = cap
        self.values: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def add_ref(self, ref: dict[str, Any], *, whole: bool = False) -> None:
        if "value" in ref:
            self._walk(ref["value"])  # inline, but it may still name message chains
        else:
            self._add(ref["digest"], whole=whole)

    def _add(self, digest: str, *, whole: bool = False) -> Any:
        if digest in self.values or digest in self.errors:
            return self.values.get(digest)
        try:
            raw = self.store.get_blob(digest)  # re-hashed by the pack reader
        except RarError as exc:
            self.errors[digest] = exc.message
            return None
        except (OSError, ValueError, KeyError) as exc:
            self.errors[digest] = f"cannot read blob: {exc}"
            return None
        if len(raw) > self.cap and not whole:
            self.values[digest] = _cut(raw, self.cap)
            return None
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            self.errors[digest] = f"blob {digest} is not JSON ({len(raw)} bytes)"
            return None
        self.values[digest] = value
        if _CHAIN.encode() in raw:
            self._walk(value)
        return value

    def _walk(self, value: Any) -> None:
        stack = [value]
        while stack:
            current = stack.pop()
            if isinstance(current, dict):
                head = current.get(_CHAIN)
                if isinstance(head, str) and _DIGEST.fullmatch(head):
                    self._chain(head)
                else:
                    stack.extend(current.values())
            elif isinstance(current, list):
                stack.extend(current)

    def _chain(self, head: str) -> None:
        node: str | None = head
        while node is not None and node not in self.values:  # a seen node: the rest is in
            body = self._add(node)
            if not isinstance(body, dict):
                return
            item = body.get("item")
            if isinstance(item, str) and _DIGEST.fullmatch(item):
                self._add(item)
            prev = body.get("prev")
            node = prev if isinstance(prev, str) and _DIGEST.fullmatch(prev) else None


def _artifacts(
    store: Any, events: Iterable[dict[str, Any]], cap: int = PICTURE_CAP
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for event in events:
        if event.get("type") != "artifact" or not isinstance(event.get("name"), str):
            continue
        media_type = str(event.get("media_type") or "")
        entry: dict[str, Any] = {
            "media_type": media_type,
            "size": event.get("size"),
            "digest": event.get("digest"),
            "url": None,
            "note": None,
        }
        if media_type not in PICTURE_TYPES:
            entry["note"] = "only pictures are embedded in an exported page"
        elif not isinstance(event.get("size"), int) or event["size"] > cap:
            entry["note"] = f"larger than {cap} bytes: left out of the exported page"
        else:
            try:
                raw = store.get_blob(str(event.get("digest")))
                entry["url"] = f"data:{media_type};base64,{base64.b64encode(raw).decode()}"
            except RarError as exc:
                entry["note"] = f"cannot be read: {exc.message}"
        found[event["name"]] = entry
    return found


def export_data(store: Any, run_id: str, *, cap: int = PAYLOAD_CAP) -> dict[str, Any]:
    """The document embedded in the page (see the module's docstring)."""
    from rar.viewer.app import Viewer, build_run_detail

    detail, log = build_run_detail(Viewer(Path(store.root)), store, run_id)
    blobs = _Blobs(store, cap)
    for event in log.events:
        for name, ref in event.items():
            if _is_ref(ref):
                blobs.add_ref(ref, whole=(event.get("type"), name) in _WHOLE)
    return {
        "format": FORMAT,
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
        "blobs": blobs.values,
        "payload_errors": blobs.errors,
        "artifacts": _artifacts(store, log.events),
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


def _embed(data: dict[str, Any], compress: bool | None) -> str:
    text = embed_json(data)
    if compress is None:
        compress = len(text) > COMPRESS_ABOVE
    if not compress:
        return f'<script type="application/json" id="rar-data">{text}</script>'
    packed = base64.b64encode(gzip.compress(text.encode("utf-8"), 9, mtime=0)).decode("ascii")
    lines = "\n".join(packed[i : i + 120] for i in range(0, len(packed), 120))
    return f'<script type="application/octet-stream" id="rar-data-gz">\n{lines}\n</script>'


def read_embedded(html: str) -> dict[str, Any]:
    """The document embedded in an exported page (plain or compressed)."""
    html = html.split("</head>", 1)[0]  # the data element is in the head, before any script
    match = _PLAIN_RE.search(html)
    if match is not None:
        data: dict[str, Any] = json.loads(match.group(1))
        return data
    match = _GZ_RE.search(html)
    if match is None:
        raise ValueError("no rar export data in this HTML")
    raw = gzip.decompress(base64.b64decode("".join(match.group(1).split())))
    data = json.loads(raw)
    return data


def _inline_code(text: str, tag: str) -> str:
    # the viewer's own code: make sure it cannot end its element early
    return text.replace(f"</{tag}", f"<\\/{tag}")


def render_html(data: dict[str, Any], *, compress: bool | None = None) -> str:
    """The page for ``data`` (from :func:`export_data`); ``compress``: None decides by size."""
    from rar.viewer.app import SCRIPTS, STYLES

    static = _static_dir()
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
{_embed(data, compress)}
</head>
<body>
<header class="top"><span class="brand">RAR viewer</span> \
<span class="muted">offline export of one run</span></header>
<main id="app"><p class="muted" id="loading">Loading…</p></main>
<noscript><p>This exported run needs JavaScript to display.</p></noscript>
{js}</body>
</html>
"""


def export_html(
    store: Any, run_id: str, *, cap: int = PAYLOAD_CAP, compress: bool | None = None
) -> str:
    """The run ``run_id`` of ``store`` as one self-contained HTML document."""
    return render_html(export_data(store, run_id, cap=cap), compress=compress)
