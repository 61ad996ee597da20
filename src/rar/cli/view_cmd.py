"""``rar view``: serve the run store to a browser, read-only, on 127.0.0.1 by default; with
``--allow-runs``, also start, replay, branch and resume runs from the page."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import webbrowser
from pathlib import Path
from typing import Any

import click

from rar.cli.options import COUNT, PORT

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
@click.option(
    "--allow-runs",
    is_flag=True,
    help="Also ask questions, replay, branch and resume runs from the page (off by default).",
)
@click.option(
    "--corpus-root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="With --allow-runs: the page may name the directories directly under DIR as corpora "
    "(default: the packaged demo corpus only).",
)
@click.option(
    "--parallel",
    type=COUNT,
    default=1,
    show_default=True,
    help="With --allow-runs: runs executed at once; the others wait in a queue.",
)
@click.option(
    "--token",
    default=None,
    metavar="TOKEN",
    help="Require TOKEN on every request (generated and printed when --allow-runs listens "
    "beyond loopback without one).",
)
@click.pass_context
def view_command(
    ctx: click.Context,
    store_path: Path | None,
    host: str,
    port: int,
    no_open: bool,
    allow_runs: bool,
    corpus_root: Path | None,
    parallel: int,
    token: str | None,
) -> None:
    """Browse runs in a local web viewer (read-only unless --allow-runs; never changes a run)."""
    import uvicorn

    from rar.viewer.app import RunSettings, create_app
    from rar.viewer.net import host_warning, is_loopback

    if not allow_runs and (corpus_root is not None or parallel != 1):
        raise click.UsageError("--corpus-root and --parallel go with --allow-runs")
    if token is not None and (len(token) < 16 or not token.isprintable() or " " in token):
        raise click.UsageError("--token must be at least 16 printable characters, no spaces")
    root = store_path if store_path is not None else Path(ctx.find_root().obj or "runs")
    if allow_runs:  # a new user's first run creates the store
        from rar.store.store import Store

        Store(root, create=True).close()
    if not root.is_dir():
        from rar.errors import StoreError

        raise StoreError(
            f"there is no run store at {root}; record a run first (rar demo), or name the "
            "store with --store DIR or RAR_HOME",
            exit_code=2,
        )
    loopback = is_loopback(host)
    if allow_runs and not loopback and token is None:
        import secrets

        token = secrets.token_urlsafe(24)
    warning = host_warning(host)
    if warning and token is None:
        click.echo(warning, err=True)
    elif not loopback:
        click.echo(
            f"warning: listening on {host}, not on a loopback address; every request must "
            "carry the access token" + (", and pages can start runs" if allow_runs else ""),
            err=True,
        )
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    # a wildcard address is not something a browser can open: show the loopback one
    shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "[::]": "[::1]"}.get(host, host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    url = f"http://{shown}:{bound_port}/"
    if token is not None:
        url += f"?token={token}"
    runs = RunSettings(corpus_root=corpus_root, parallel=parallel) if allow_runs else None
    # loopback: loopback names only (no DNS rebinding); beyond it any name the machine has,
    # which only the token (when there is one) gates
    hosts = None if loopback else ["*"]
    app = create_app(root, allowed_hosts=hosts, runs=runs, access_token=token, port=bound_port)
    # h11 on asyncio's loop whatever else is installed (rar proxy's httptools and uvloop are):
    # the viewer behaves as it was tested, and it is not latency-bound
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", http="h11", loop="asyncio"
    )
    server = uvicorn.Server(config)
    what = "starts runs from the page" if allow_runs else "read-only"
    announcer = threading.Thread(
        target=_announce, args=(server, root, url, not no_open, what), daemon=True
    )
    announcer.start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        if app.state.jobs is not None:
            app.state.jobs.shutdown()


def _announce(server: Any, root: Path, url: str, open_browser: bool, what: str) -> None:
    """Print the URL once the server answers requests (never before), then open a browser."""
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.01)
    click.echo(f"RAR viewer for {root} at {url} ({what}; Ctrl-C stops it)")
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
