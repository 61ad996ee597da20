"""Headless Chromium for browser tests: Debian's /usr/bin/chromium driven by Playwright."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def launch_chromium(playwright: Any) -> Any:
    """A headless Chromium browser (never one downloaded by `playwright install`)."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=list(CHROMIUM_ARGS)
    )
