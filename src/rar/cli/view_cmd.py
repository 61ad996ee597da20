"""``rar view``: serve the run store to a browser, read-only, on 127.0.0.1 by default."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import webbrowser
from pathlib import Path
from typing import Any

import click

from rar.cli.options import PORT

DEFAULT_PORT = 8765


@click.command("view")
@click.option(
    "--store",
    "store_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory of the run store (default: the one given to rar).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=PORT,
    default=DEFAULT_PORT,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
@click.pass_context
def view_command(
    ctx: click.Context, store_path: Path | None, host: str, port: int, no_open: bool
) -> None:
    """Browse runs in a local web viewer (read-only; never changes the store)."""
    import uvicorn

    from rar.viewer.app import create_app
    from rar.viewer.net import host_warning, is_loopback

    root = store_path if store_path is not None else Path(ctx.find_root().obj or "runs")
    if not root.is_dir():
        from rar.errors import StoreError

        raise StoreError(
            f"there is no run store at {root}; record a run first (rar demo), or name the "
            "store with --store DIR or RAR_HOME",
            exit_code=2,
        )
    warning = host_warning(host)
    if warning:
        click.echo(warning, err=True)
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    # a wildcard address is not something a browser can open: show the loopback one
    shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "[::]": "[::1]"}.get(host, host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    url = f"http://{shown}:{bound_port}/"
    app = create_app(root, allowed_hosts=None if is_loopback(host) else ["*"])
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    announcer = threading.Thread(
        target=_announce, args=(server, root, url, not no_open), daemon=True
    )
    announcer.start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


def _announce(server: Any, root: Path, url: str, open_browser: bool) -> None:
    """Print the URL once the server answers requests (never before), then open a browser."""
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.01)
    click.echo(f"RAR viewer for {root} at {url} (Ctrl-C stops it)")
    if open_browser:
        _open(url)


def _bind(host: str, port: int) -> socket.socket:
    name = host.strip("[]")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        from rar.errors import ConfigError

        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); try another --port, "
            "or --port 0 for any free one"
        ) from exc
    return sock


def _open(url: str) -> None:
    with contextlib.suppress(Exception):  # no browser is not an error
        webbrowser.open(url)
