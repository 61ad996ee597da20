"""Errors of the sandbox. A cell that fails is a :class:`~rar.sandbox.CellResult`, not an error;
these are raised only when the sandbox itself cannot work::

    RarError
    └── SandboxError                the sandbox cannot do what was asked
        ├── SandboxUnavailableError bubblewrap is missing or cannot create namespaces here
        ├── SandboxStartError       the worker did not come up (names what it printed)
        └── SandboxClosedError      run_cell on a closed sandbox
"""

from __future__ import annotations

from rar.errors import RarError, UserError

INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: "
    "`dnf install bubblewrap`) and make sure user namespaces are enabled "
    "(`sysctl kernel.unprivileged_userns_clone=1` on older Debian kernels), or pass "
    "unsafe_local=True / --unsafe-local to run without isolation (only for trusted code)."
)


class SandboxError(RarError):
    """The sandbox cannot do what was asked."""

    exit_code = 3


class SandboxUnavailableError(SandboxError):
    """bubblewrap is not installed, or it cannot create the namespaces it needs."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"the code sandbox is unavailable: {reason}. {INSTALL_HINT}", reason=reason
        )


class SandboxStartError(SandboxError):
    """The worker process did not start (or did not answer its first message)."""

    def __init__(self, reason: str, output: str = "") -> None:
        shown = f"; it printed: {output.strip()[-2000:]}" if output.strip() else ""
        super().__init__(
            f"the sandbox worker did not start: {reason}{shown}", reason=reason, output=output
        )


class SandboxClosedError(SandboxError, UserError):
    """A cell was sent to a sandbox that was already closed."""

    exit_code = 2

    def __init__(self) -> None:
        super().__init__("this sandbox is closed; create a new Sandbox to run more cells")
