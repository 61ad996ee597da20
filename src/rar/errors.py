"""The exception tree of RAR.

Every exception RAR raises on purpose derives from :class:`RarError`::

    RarError
    ├── UserError                  you used it wrong: fix the call or the input
    │   ├── CanonicalizationError  a value cannot be hashed canonically (NaN, big int, bytes, ...)
    │   └── ConfigError            a setting or argument is invalid
    │       ├── MissingAPIKeyError a provider's key is not set (names the variable)
    │       ├── ProfileError       a profile file or entry is invalid (names file, profile, field)
    │       └── ContextLengthExceededError  a request is longer than its profile's context
    ├── StoreError                 the run store cannot do what was asked
    │   ├── StoreNotWritableError  the store directory cannot be created or written
    │   ├── RunNotFoundError       no run matches an id or prefix
    │   ├── AmbiguousRunIdError    a prefix matches several runs
    │   ├── RunLockedError         another process is writing that run
    │   ├── RunExistsError         a new run was given the id of an existing one
    │   ├── ManifestMissingError   a run directory without a readable manifest.json
    │   ├── BlobMissingError       an event references a blob that is not in the store
    │   ├── CorruptionError        bytes on disk do not match their digest or format
    │   └── AppendError            an append failed (disk full, I/O error); the log is intact
    ├── RunError                   a recorded run cannot continue
    │   ├── RunClosedError         an effect was attempted on a finished run
    │   └── StructuredOutputError  a model's answer did not validate after every repair attempt
    └── ProviderError              a model provider failed (carries provider, status, retryable)
        ├── AuthenticationError    401/403: the key was refused (names the key reference)
        ├── BadRequestError        400/422: the provider rejected the request
        ├── ModelNotFoundError     404: no such model or endpoint
        ├── RateLimitError         429: too many requests (retry_after seconds when given)
        ├── ProviderUnavailableError  5xx, timeouts, connection errors: worth retrying
        ├── MalformedResponseError the provider answered something RAR cannot read
        └── StreamInterruptedError a streamed answer stopped before it finished

One warning class sits beside the tree: :class:`RarDeprecationWarning` (a ``DeprecationWarning``)
for an old name that still works, e.g. an import path that moved (see ``rar._moved``).

Every error carries structured attributes (``run_id``, ``seq``, ``path``, ...) next to a
message that says what happened, why, and what to do next. The CLI prints the message and
exits with :attr:`RarError.exit_code`.

Messages and string attributes pass :func:`rar.redaction.redact_output` when the error is made:
a provider's error body, a tool's output or an exception quoted in a message may hold a
credential, and what RAR raises is redacted as what it records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _redacted(text: Any) -> Any:
    """``text`` through the output redactor (rar.redaction sits beside this module and imports
    it only to raise ConfigError, so the import is made on first use)."""
    if not isinstance(text, str):
        return text
    from rar.redaction import redact_output

    return redact_output(text)


class RarError(Exception):
    """Root of every error RAR raises on purpose."""

    exit_code: int = 3

    def __init__(self, message: str, **details: Any) -> None:
        message = _redacted(message)
        details = {key: _redacted(value) for key, value in details.items()}
        super().__init__(message)
        self.message = message
        self.details = details
        for key, value in details.items():
            setattr(self, key, value)

    def __str__(self) -> str:
        return self.message


# --- you used it wrong -----------------------------------------------------------------------


class UserError(RarError):
    """A call or an input was wrong; nothing was recorded because of it."""

    exit_code = 2


class CanonicalizationError(UserError):
    """A value cannot be written as canonical JSON (RFC 8785)."""

    def __init__(self, message: str, *, path: str = "$") -> None:
        super().__init__(f"cannot hash value at {path}: {message}", path=path)


class ConfigError(UserError):
    """A setting, option or argument is invalid."""


# --- the store -------------------------------------------------------------------------------


class StoreError(RarError):
    """The run store cannot do what was asked."""

    exit_code = 3


class StoreNotWritableError(StoreError):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"cannot write the run store at {path}: {reason}. "
            "Choose a writable directory with --store DIR or the RAR_HOME environment variable.",
            path=path,
        )


class RunNotFoundError(StoreError):
    exit_code = 2

    def __init__(self, run_ref: str, store: Path) -> None:
        super().__init__(
            f"no run matches {run_ref!r} in the store {store}. "
            "`rar list` shows the runs there; --store DIR or RAR_HOME picks another store.",
            run_ref=run_ref,
            store=store,
        )


class AmbiguousRunIdError(StoreError):
    exit_code = 2

    def __init__(self, run_ref: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:5]) + (" ..." if len(candidates) > 5 else "")
        super().__init__(
            f"{run_ref!r} matches {len(candidates)} runs ({shown}); "
            "give more characters of the id.",
            run_ref=run_ref,
            candidates=candidates,
        )


class RunLockedError(StoreError):
    def __init__(self, run_id: str, path: Path, holder: str) -> None:
        super().__init__(
            f"run {run_id} is being written by another process ({holder}); "
            "only one writer per run is allowed. Wait for it to finish, or stop it. "
            f"Lock file: {path}",
            run_id=run_id,
            path=path,
            holder=holder,
        )


class RunExistsError(StoreError):
    exit_code = 2

    def __init__(self, run_id: str, path: Path) -> None:
        super().__init__(
            f"a run with id {run_id} already exists at {path}; pick another id "
            "(or leave it out and RAR chooses a fresh one).",
            run_id=run_id,
            path=path,
        )


class ManifestMissingError(StoreError):
    def __init__(self, run_id: str, path: Path, reason: str = "missing") -> None:
        super().__init__(
            f"run {run_id} has no usable manifest at {path} ({reason}). "
            "`rar verify` lists what else is damaged in that run.",
            run_id=run_id,
            path=path,
        )


class BlobMissingError(StoreError):
    def __init__(self, digest: str, store: Path) -> None:
        super().__init__(
            f"blob {digest} is referenced but not present in {store / 'blobs'}. "
            "The store is incomplete (copied partially?); `rar verify` lists every missing blob.",
            digest=digest,
            store=store,
        )


class CorruptionError(StoreError):
    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        run_id: str | None = None,
        seq: int | None = None,
        line: int | None = None,
    ) -> None:
        where = f" ({path}{f', line {line}' if line is not None else ''})" if path else ""
        super().__init__(
            f"{message}{where}. Nothing was changed; `rar verify` reports every damaged item.",
            path=path,
            run_id=run_id,
            seq=seq,
            line=line,
        )


class AppendError(StoreError):
    def __init__(
        self, path: Path, reason: str, *, what: str = "log", rolled_back: bool = True
    ) -> None:
        if rolled_back:
            state = {
                "log": "The log was rolled back to its last complete line",
                "pack": "The blob pack was rolled back to its last complete record",
            }.get(what, "Nothing partial was left behind")
        else:
            state = (
                "A partial write is still at the end of the file; it is cut before anything "
                "else is written, or when the run is reopened"
            )
        super().__init__(
            f"could not write {path}: {reason}. {state}, so everything recorded before is "
            "intact; free disk space (or fix the I/O error) and resume the run.",
            path=path,
            what=what,
        )


# --- runs --------------------------------------------------------------------------------------


class RunError(RarError):
    """A recorded run cannot continue."""


class RunClosedError(RunError):
    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"run {run_id} is already finished; start a new run (or branch this one) "
            "to record more effects.",
            run_id=run_id,
        )


class StructuredOutputError(RunError):
    def __init__(self, schema_name: str, attempts: int, last_error: str) -> None:
        super().__init__(
            f"the model's answer did not match {schema_name} after {attempts} attempt(s); "
            f"last problem: {last_error}. Every attempt is in the record.",
            schema_name=schema_name,
            attempts=attempts,
            last_error=last_error,
        )


class MissingAPIKeyError(ConfigError):
    def __init__(self, provider: str, variables: list[str]) -> None:
        names = " or ".join(variables)
        super().__init__(
            f"no API key for {provider}: set {names} (or name a profile whose api_key "
            "references one).",
            provider=provider,
            variables=variables,
        )


class ProfileError(ConfigError):
    def __init__(self, message: str, *, path: Path | None = None, profile: str | None = None,
                 field: str | None = None) -> None:
        where = ", ".join(
            part
            for part in (
                f"file {path}" if path else "",
                f"profile {profile!r}" if profile else "",
                f"field {field!r}" if field else "",
            )
            if part
        )
        super().__init__(
            f"{where}: {message}" if where else message, path=path, profile=profile, field=field
        )


class ContextLengthExceededError(ConfigError):
    """A request does not fit its profile's ``max_context_length``: refused before it is sent,
    so nothing is recorded for it."""

    def __init__(
        self,
        *,
        profile: str,
        limit: int,
        prompt_tokens: int,
        max_tokens: int,
        encoding: str | None,
        trimmed: bool = False,
    ) -> None:
        needed = prompt_tokens + max_tokens
        counted = f"counted with {encoding}" if encoding else "estimated at 4 characters a token"
        what = (
            "even trimmed to its system messages and its last user turn, the request needs "
            if trimmed
            else "the request needs "
        )
        advice = (
            "shorten the system prompt or the last message, lower max_tokens, or use a profile "
            "with a longer context"
            if trimmed
            else 'shorten the conversation, lower max_tokens, set context_overflow = "trim" in '
            "the profile to drop the oldest turns, or use a profile with a longer context"
        )
        super().__init__(
            f"{what}{needed} tokens ({prompt_tokens} of prompt, {counted}, + max_tokens "
            f"{max_tokens}), more than the max_context_length of {limit} of profile "
            f"{profile!r}; nothing was sent or recorded. To fix it: {advice}.",
            profile=profile,
            limit=limit,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            tokens=needed,
            encoding=encoding,
            trimmed=trimmed,
        )


# --- providers ----------------------------------------------------------------------------------


class ProviderError(RarError):
    """A model provider failed. ``retryable`` says whether trying again may help."""

    exit_code = 3
    retryable = False

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        retry_after: float | None = None,
        body: str | None = None,
    ) -> None:
        prefix = f"{provider}" + (f" returned HTTP {status}" if status else "")
        super().__init__(
            f"{prefix}: {message}",
            provider=provider,
            status=status,
            retry_after=retry_after,
            body=body,
        )


class AuthenticationError(ProviderError):
    pass


class BadRequestError(ProviderError):
    pass


class ModelNotFoundError(ProviderError):
    pass


class RateLimitError(ProviderError):
    retryable = True


class ProviderUnavailableError(ProviderError):
    retryable = True


class MalformedResponseError(ProviderError):
    pass


class StreamInterruptedError(ProviderError):
    retryable = True


# --- warnings --------------------------------------------------------------------------------


class RarDeprecationWarning(DeprecationWarning):
    """Something still works but is going away: the message names what to use instead.

    A warning, not a :class:`RarError`: nothing failed. Filter it by this class, e.g.
    ``warnings.simplefilter("error", RarDeprecationWarning)`` to find the old names a code base
    still uses.
    """
