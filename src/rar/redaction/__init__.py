"""Credential redaction for everything RAR writes to a run record — and everything it prints,
raises or serves.

Every JSON value that goes into a run record (requests, responses, tool arguments and results,
errors, manifests) passes through :class:`Redactor` first; every message RAR shows (the CLI's
``error:`` line, :class:`~rar.errors.RarError` messages, the viewer's error answers) passes
through :func:`redact_output`, the same rules with the process's environment. The policy:

* **Replacement.** A secret becomes ``[REDACTED:<kind>:<tag>]``, ``<tag>`` being
  :func:`secret_tag` of the secret: the first 8 hex digits of ``sha256(b"rar-redact:" +
  secret)``. Unsalted, so the same secret gives the same marker in every process and run; two
  records can be compared ("same key?") without storing the key. A tag cannot give back a
  random API key, but it can confirm a guess of a weak password (32 bits, fast hash).
* **Sensitive keys.** In a dict, the value under a key that says "secret" is replaced whole:
  the names of :data:`SENSITIVE_KEYS`, and any key whose last word is ``password``, ``secret``,
  ``cookie``, ``authorization``, ``<x>_token``, ``<credential>_key``... (``db_password``,
  ``github_token``, ``X-Vault-Token``; not ``max_tokens``, ``next_page_token``, ``sort_key``,
  nor ``token`` alone, which is a logprob). Kind = the key lowercased, ``-`` → ``_``. For
  ``authorization`` the scheme word stays visible (``Bearer [REDACTED:authorization:…]``).
  References (``env:VAR``, ``${VAR}``), placeholders, markers and non-strings stay. Dict keys
  are never altered.
* **Formats in text.** Every string is searched for credentials by their shape: 69 vendor
  patterns of 55 kinds (OpenAI, Anthropic, Google, AWS, GitHub, GitLab, Slack, Stripe, Hugging
  Face, Groq, Replicate, npm, PyPI, Azure, ...; :data:`KINDS`), JWTs, PEM private keys,
  ``Bearer``/``Basic`` credentials, URL user-info, ``curl -u user:pw``, and values after a
  secret name (``password=…``, ``"api_key": "…"``, ``AccountKey=…;``, ``?key=…``). Only the
  secret part is replaced (``Bearer``, ``?key=``, ``://…@host`` stay).
* **Encodings.** Base64 text that decodes to printable text holding a credential is replaced
  whole (with the credential's own marker when it is exactly one credential, else kind
  ``base64``); URL-encoded credentials are found in the decoded text and replaced in place,
  with the decoded secret's tag.
* **Literal secrets.** The values of environment variables whose name says "secret"
  (``*_TOKEN``, ``*_KEY``, ``*PASSWORD*``, ``*_SECRET``; not ``TOKENIZER_NAME``, ``PWD``,
  ``SSH_AUTH_SOCK``) are redacted wherever they occur, raw, base64- or URL-encoded (kind
  ``env``), unless the value cannot be a secret or would redact ordinary text (shorter than 8,
  a path, a number, plain lower-case words up to 24 letters). So are ``extra_secrets`` (kind
  ``secret``).
* **What is left alone.** Digests, UUIDs, git SHAs, base64 of binary data (images) or of text
  without credentials, AWS's documentation example keys (``AKIAIOSFODNN7EXAMPLE``: published
  by AWS, they grant nothing), model names, paths, query strings (``?key=reports/x.pdf``),
  ``sk-`` inside words or CSS names, prose ("the basic idea", "Bearer authentication").
* **Idempotent, never nested**: ``redact(redact(x)) == redact(x)``; marker text is never
  searched again. **Identity when clean**: :meth:`Redactor.redact` returns the very object
  when nothing changed, copying containers only along the path to a change.
* **Fast when clean.** A pre-check on a byte view of the string (token runs of 16+, ``%``,
  ``://…@``, a handful of words) answers for nearly every string in a few C-level scans.

Redaction is a safety net, not a guarantee: a secret in a shape nobody told the redactor about
(an unknown vendor's key in free text, a password in a numeric field) is recorded as is. Pass
such secrets as ``extra_secrets`` or through the environment.
"""

from ._redactor import (
    KINDS,
    POLICY_VERSION,
    SENSITIVE_KEYS,
    Redactor,
    default_redactor,
    env_secrets,
    redact_output,
    redaction_policy,
)
from ._tags import secret_tag

__all__ = [
    "KINDS",
    "POLICY_VERSION",
    "SENSITIVE_KEYS",
    "Redactor",
    "default_redactor",
    "env_secrets",
    "redact_output",
    "redaction_policy",
    "secret_tag",
]
