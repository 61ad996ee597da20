"""Headless Chromium for browser tests: Debian's /usr/bin/chromium driven by Playwright, and the
real viewer served on 127.0.0.1 for it to open."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.servers._local import LocalServer

from rar.viewer import create_app

CHROMIUM = Path("/usr/bin/chromium")
# without the background-networking flags Chromium keeps trying, and failing, to reach the
# network, which this machine does not have
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
)
PAGE_TIMEOUT_MS = 10_000


def launch_chromium(playwright: Any) -> Any:
    """A headless Chromium browser (never one downloaded by `playwright install`)."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=list(CHROMIUM_ARGS)
    )


class ViewerServer(LocalServer[Any, Any]):
    """``rar view``'s app over the store at ``root``, served on 127.0.0.1 in a thread."""

    _label = "viewer"

    def __init__(self, root: Path) -> None:
        super().__init__([])
        self.app = create_app(root)


@contextmanager
def new_page(browser: Any, *, timeout_ms: int = PAGE_TIMEOUT_MS) -> Iterator[Any]:
    """A page in a fresh browser context (1280 × 900); the page's uncaught errors and console
    errors are collected in ``page.errors``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(timeout_ms)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.errors = errors
        yield page
    finally:
        context.close()


def require_browser() -> Any:
    """``playwright.sync_api``, or skip the calling test module when it or Chromium is missing."""
    import pytest

    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing (Debian package `chromium`); the browser tests need it",
            allow_module_level=True,
        )
    return pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
    )
