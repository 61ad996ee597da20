"""Text analysis shared by both BM25 backends: one tokenizer, so scores agree across them.

Tokens are what both indexes see; the passage text itself (and its hash) is never changed:

1. NFKC normalisation and Unicode case folding (``ﬁ`` → ``fi``, ``K`` → ``k``), for matching only;
2. tokens are runs of letters and digits (``\\w`` without ``_``); a decimal number such as
   ``8.314`` stays one token; everything else (hyphens, dashes, apostrophes, ``‡``) separates;
3. English stop words are dropped, and tokens longer than 40 characters (hashes, base64);
4. a light plural stemmer (``energies`` → ``energy``, ``plots`` → ``plot``, ``processes`` →
   ``process``; ``analysis`` and ``gas`` stay), deterministic and dependency-free.

:data:`ANALYSIS_VERSION` names these rules; a persisted index built under other rules is rebuilt.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

ANALYSIS_VERSION: Final = "rar-bm25-analysis/1"
SNIPPET_CHARS: Final = 300
MAX_TOKEN_CHARS: Final = 40


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TOKEN = re.compile(r"\d+(?:\.\d+)+|[^\W_]+")

STOP_WORDS: Final = _words(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t don
    """
)

# words ending in "s" that are not plurals (or whose stem would be wrong)
_KEEP_S: Final = _words(
    "analysis basis thesis hypothesis synthesis catalysis hydrolysis pyrolysis electrolysis "
    "dialysis emphasis axis gas was is has this its thus plus less various previous"
    " continuous numerous gaseous aqueous arrhenius celsius radius nucleus stimulus locus"
    " modulus calculus consensus status apparatus mechanics physics kinetics thermodynamics"
    " dynamics mathematics statistics series species lens"
)


def stem(word: str) -> str:
    """A light, plural-only stemmer (the 'S' stemmer with the common English exceptions)."""
    if len(word) <= 3 or not word.endswith("s") or word in _KEEP_S or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4 and word[-4] not in "aeiou":
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zzes")):
        return word[:-2]
    if word.endswith(("ss", "us", "is")):
        return word
    return word[:-1]


_TERMS: dict[str, str] = {}  # word -> index term ("" for a dropped word); words recur constantly
_CACHE_LIMIT: Final = 200_000


def tokenize(text: str) -> list[str]:
    """The index tokens of ``text``, in order (repeats kept: they are term frequencies)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    cache = _TERMS
    out: list[str] = []
    for token in _TOKEN.findall(folded):
        term = cache.get(token)
        if term is None:
            term = "" if token in STOP_WORDS or len(token) > MAX_TOKEN_CHARS else stem(token)
            if len(cache) < _CACHE_LIMIT:
                cache[token] = term
        if term:
            out.append(term)
    return out


def query_terms(text: str) -> list[str]:
    """The distinct tokens of a query, sorted (a repeated query word does not count twice)."""
    return sorted(set(tokenize(text)))


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters on a word boundary, with ``…`` when cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"
