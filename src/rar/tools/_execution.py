"""Running one tool function: sync or async, from sync or async code, under a time limit.

A synchronous function with a timeout runs in a *daemon* thread and the caller stops waiting
when the limit passes. Python cannot kill a thread: the function runs on in the background
until it returns, and what it returns is dropped. (A daemon thread does not keep the
interpreter alive, and it is not in ``asyncio``'s default executor, so a hung tool does not
hang ``asyncio.run`` at shutdown either.) Asynchronous functions are cancelled.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rar.tools.core import Tool


def timeout_error(tool: Tool, *, thread: bool) -> TimeoutError:
    note = " (it may still be running in a background thread, which cannot be stopped)"
    return TimeoutError(
        f"tool {tool.name!r} did not finish within its time limit of {tool.timeout:g} s"
        + (note if thread else "")
    )


def call_sync(tool: Tool, kwargs: dict[str, Any]) -> Any:
    """Run ``tool`` with validated ``kwargs`` from synchronous code; return what it returns."""
    if tool.is_async:
        return run_coroutine(lambda: call_async(tool, kwargs))
    result = tool.fn(**kwargs) if tool.timeout is None else _in_daemon_thread(tool, kwargs)
    if inspect.isawaitable(result):
        return run_coroutine(lambda: _await(result))
    return result


async def call_async(tool: Tool, kwargs: dict[str, Any]) -> Any:
    """Run ``tool`` from asynchronous code; sync tools go to a worker thread."""
    if tool.is_async:
        work: asyncio.Future[Any] = asyncio.ensure_future(tool.fn(**kwargs))
        if tool.timeout is None:
            return await work
        done, _ = await asyncio.wait({work}, timeout=tool.timeout)
        if not done:
            work.cancel()
            raise timeout_error(tool, thread=False)
        return work.result()
    if tool.timeout is None:
        result = await asyncio.to_thread(tool.fn, **kwargs)
    else:
        result = await _in_daemon_thread_async(tool, kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def run_coroutine(factory: Callable[[], Awaitable[Any]]) -> Any:
    """Run a coroutine to completion from synchronous code.

    With no event loop running in this thread, ``asyncio.run``; inside a running loop (a sync
    call from async code), on a fresh loop in a helper thread while this thread waits.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(factory()))
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rar-tool-loop") as pool:
        return pool.submit(context.run, asyncio.run, _await(factory())).result()


def _in_daemon_thread(tool: Tool, kwargs: dict[str, Any]) -> Any:
    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome.append((True, context.run(tool.fn, **kwargs)))
        except BaseException as exc:  # handed to the waiting caller
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=target, name=f"rar-tool-{tool.name}", daemon=True).start()
    if not done.wait(tool.timeout):
        raise timeout_error(tool, thread=True)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


async def _in_daemon_thread_async(tool: Tool, kwargs: dict[str, Any]) -> Any:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def target() -> None:
        try:
            result: tuple[bool, Any] = (True, context.run(tool.fn, **kwargs))
        except BaseException as exc:
            result = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed while an abandoned tool ran
            loop.call_soon_threadsafe(settle, *result)

    threading.Thread(target=target, name=f"rar-tool-{tool.name}", daemon=True).start()
    done, _ = await asyncio.wait({future}, timeout=tool.timeout)
    if not done:
        future.cancel()
        raise timeout_error(tool, thread=True)
    return future.result()
