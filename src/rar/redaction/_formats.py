"""Credential formats recognised by their shape: vendor prefixes and fixed structures.

The list follows the rule sets of the public secret scanners (gitleaks' ``config/gitleaks.toml``,
detect-secrets' plugins) for the services an agent is likely to meet; the patterns are written
here, not copied. Each format is matched inside a *token run* (a stretch of letters, digits and
``+/=_.~-``) and must start at a word boundary. A few formats add a check a regex cannot say
well (a key id is not AWS's documentation example; an ``sk-`` key is not a CSS class name).

Formats whose credential has no shape of its own (Mistral, Cohere, Azure OpenAI keys, plain
hex) are found only by their name (``api_key=…``, ``{"x-api-key": …}``) or as literal secrets.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final


def _digit_and_letter(secret: str) -> bool:
    return any(c.isdigit() for c in secret) and any(c.isalpha() for c in secret)


def _mixed_case(secret: str) -> bool:
    body = secret[secret.index("_") + 1 :]
    return body != body.lower() and body != body.upper()


def _not_aws_example(secret: str) -> bool:
    # AWS's documentation keys (AKIAIOSFODNN7EXAMPLE, AKIAI44QH8DHBEXAMPLE) grant nothing.
    return not secret.endswith("EXAMPLE")


_SK_RUN: Final = re.compile(r"[A-Za-z0-9]{16,}")


def _sk_body(secret: str) -> bool:
    """A bare ``sk-`` key (legacy OpenAI, DeepSeek, OpenRouter, Moonshot, ...) has a random run
    of 16+ letters and digits with both in it; ``sk-three-bounce-animation-wrapper`` does not."""
    return any(_digit_and_letter(m.group()) for m in _SK_RUN.finditer(secret, 3))


@dataclass(frozen=True, slots=True)
class Format:
    """One credential shape: the marker ``kind``, a regex that starts with a literal character
    (a group ``v`` in it, when present, is the secret; the rest, such as a webhook's host, stays
    visible), and an optional check of the matched text."""

    kind: str
    pattern: str
    check: Callable[[str], bool] | None = None
    boundary: bool = True  # must not follow a letter or digit (False: the prefix is enough)


# Every pattern starts with a literal character.
FORMATS: Final[tuple[Format, ...]] = (
    Format("anthropic", r"sk-ant-[A-Za-z0-9_-]{20,}", _digit_and_letter),
    Format("openai", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{32,}"),
    Format("openai", r"sk-(?!ant-)[A-Za-z0-9_-]{20,}", _sk_body),
    Format("google", r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", boundary=False),
    Format("google_oauth", r"ya29\.[0-9A-Za-z_-]{30,}"),
    Format("google_oauth", r"GOCSPX-[0-9A-Za-z_-]{28}(?![0-9A-Za-z_-])"),
    Format("aws", r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])", _not_aws_example),
    Format("github", r"gh[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9])", boundary=False),
    Format("github", r"github_pat_[A-Za-z0-9_]{22,}", boundary=False),
    Format(
        "gitlab",
        r"gl(?:pat|ptt|dt|rt|ft|soat|imt|agent|oas|ffct|cbt|wt)-[A-Za-z0-9_.-]{20,}",
        _digit_and_letter,
    ),
    Format("gitlab", r"GR1348941[A-Za-z0-9_-]{20,}"),
    Format("slack", r"xox[abposre]-[A-Za-z0-9-]{10,}", _digit_and_letter),
    Format("slack", r"xapp-[0-9]-[A-Za-z0-9-]{10,}"),
    Format("slack", r"xoxe\.xox[bp]-[0-9]-[A-Za-z0-9]{20,}"),
    Format(
        "slack_webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9+/_-]{20,})",
    ),
    Format("stripe", r"sk_(?:live|test|prod)_[A-Za-z0-9]{10,}", _digit_and_letter),
    Format("stripe", r"rk_(?:live|test|prod)_[A-Za-z0-9]{10,}", _digit_and_letter),
    Format("stripe", r"whsec_[A-Za-z0-9+/=]{24,}"),
    Format("huggingface", r"hf_[A-Za-z]{30,}(?![A-Za-z0-9])", _mixed_case),
    Format("huggingface", r"api_org_[A-Za-z]{30,}(?![A-Za-z0-9])", _mixed_case),
    Format("npm", r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    Format("pypi", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}", boundary=False),
    Format("groq", r"gsk_[A-Za-z0-9]{48,}"),
    Format("replicate", r"r8_[A-Za-z0-9]{30,}(?![A-Za-z0-9])", _digit_and_letter),
    Format("perplexity", r"pplx-[A-Za-z0-9]{40,}"),
    Format("xai", r"xai-[A-Za-z0-9]{60,}"),
    Format("sendgrid", r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"),
    Format("twilio", r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])", _digit_and_letter),
    Format("mailgun", r"key-[0-9a-f]{32}(?![A-Za-z0-9])", _digit_and_letter),
    Format("digitalocean", r"do[opr]_v1_[a-f0-9]{64}"),
    Format("shopify", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    Format("databricks", r"dapi[a-f0-9]{32}(?:-[0-9])?(?![A-Za-z0-9])"),
    Format("doppler", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    Format("atlassian", r"ATATT3[A-Za-z0-9_=-]{100,}", boundary=False),
    Format("linear", r"lin_(?:api|oauth)_[A-Za-z0-9]{40}"),
    Format("postman", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    Format("pulumi", r"pul-[a-f0-9]{40}"),
    Format("vault", r"hv[sbr]\.[A-Za-z0-9_-]{24,}", _digit_and_letter),
    Format("sentry", r"sntry[su]_[A-Za-z0-9_+/=-]{40,}"),
    Format("grafana", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    Format("grafana", r"glc_[A-Za-z0-9+/]{32,}={0,2}"),
    Format("newrelic", r"NR(?:AK|JS|II)-[A-Za-z0-9_-]{19,32}"),
    Format("age", r"AGE-SECRET-KEY-1[0-9A-Z]{58}", boundary=False),
    Format("onepassword", r"ops_eyJ[A-Za-z0-9+/]{100,}={0,3}", boundary=False),
    Format("square", r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"),
    Format("square", r"EAAA[A-Za-z0-9_-]{60,}"),
    Format("tailscale", r"tskey-(?:api|auth|client|webhook|scim)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{20,}"),
    Format("supabase", r"sbp_[a-f0-9]{40}"),
    Format("supabase", r"sb_secret_[A-Za-z0-9_-]{20,}"),
    Format("notion", r"secret_[A-Za-z0-9]{43}(?![A-Za-z0-9])", _digit_and_letter),
    Format("notion", r"ntn_[A-Za-z0-9]{40,}"),
    Format("airtable", r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"),
    Format("discord", r"discord(?:app)?\.com/api/webhooks/(?P<v>[0-9]{5,}/[A-Za-z0-9_-]{40,})"),
    Format("flyio", r"fo1_[A-Za-z0-9_-]{43}"),
    Format("flyio", r"fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3}"),
    Format("heroku", r"HRKU-[A-Za-z0-9_-]{40,}"),
    Format("cloudflare", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    Format("dynatrace", r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    Format("alibaba", r"LTAI[A-Za-z0-9]{20}(?![A-Za-z0-9])", _digit_and_letter),
    Format("planetscale", r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_.=-]{32,}"),
    Format("rubygems", r"rubygems_[a-f0-9]{48}"),
    Format("openshift", r"sha256~[A-Za-z0-9_-]{43}"),
    Format("prefect", r"pnu_[A-Za-z0-9]{36}"),
    Format("sendinblue", r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    Format("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
)

# Formats without a literal first character, each found from a rarer part inside it (the
# scan looks for the ``infix`` in a run, then matches the whole ``pattern`` around it).
INFIX_FORMATS: Final[tuple[tuple[str, str, Format], ...]] = (
    # Microsoft Entra ID (Azure AD) client secrets: 3 characters, a digit, "Q~", 31-34 more.
    ("Q~", r"[A-Za-z0-9_~.]{3}[0-9]Q~", Format("azure", r"[A-Za-z0-9_~.-]{31,34}")),
    # Mailchimp: 32 hex and the datacenter.
    ("-us", r"[0-9a-f]{32}-us", Format("mailchimp", r"[0-9]{1,2}(?![A-Za-z0-9])")),
    # Terraform Cloud / HCP: 14 characters, ".atlasv1.", 60+ more.
    (".atlasv1.", r"[A-Za-z0-9]{14}\.atlasv1\.", Format("terraform", r"[A-Za-z0-9_=-]{60,}")),
    # Telegram bot tokens: the bot id, ":", then "AA" and 33 more.
    (":AA", r"[0-9]{8,10}:AA", Format("telegram", r"[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])")),
)

#: Every kind a format can give, in the order of FORMATS (each once).
FORMAT_KINDS: Final[tuple[str, ...]] = tuple(
    dict.fromkeys([f.kind for f in FORMATS] + [f.kind for _, _, f in INFIX_FORMATS])
)


_BOUNDARY: Final = "(?<![A-Za-z0-9])"


def _searcher(formats: list[Format], lead: str) -> tuple[re.Pattern[str], tuple[Any, ...]]:
    """One regex that finds where one of ``formats`` starts, and each format's own regex.

    The finder has no groups: with one capture group per format the regex engine spends its
    time saving and restoring group marks (20 times slower). Which format it was is asked of
    each format's own regex, in order."""
    finder = re.compile(
        lead + "(?:" + "|".join(f.pattern.replace("(?P<v>", "(?:") for f in formats) + ")"
    )
    return finder, tuple((f, re.compile(lead + f.pattern)) for f in formats)


#: (finder, ((format, regex), ...)) for the formats that start at a word boundary (a position
#: not after a letter or digit: checked once, before the alternatives), then for the others.
SEARCHERS: Final = (
    _searcher([f for f in FORMATS if f.boundary], _BOUNDARY),
    _searcher([f for f in FORMATS if not f.boundary], ""),
)
INFIX_RES: Final[tuple[tuple[str, re.Pattern[str], Format], ...]] = tuple(
    (
        infix,
        re.compile(
            rf"(?<![A-Za-z0-9]){head}{fmt.pattern}"
            if infix != ":AA"
            else rf"(?<![A-Za-z0-9:]){head}{fmt.pattern}"
        ),
        fmt,
    )
    for infix, head, fmt in INFIX_FORMATS
)
