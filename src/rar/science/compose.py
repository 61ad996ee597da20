"""Composing an extractive answer: the sentences of the passages that answer a question.

Pure functions, deterministic, no I/O. Everything a pick says is a sentence of a passage, so a
claim can be checked against the passage it cites (``Picked.quote`` is an exact substring of the
passage text after whitespace normalisation).

**Sentences** (:func:`sentences`): headings (ATX, setext), tables (``|`` rows and ``---``
rules), fenced and indented code and HTML comments are left out; each list item is its own unit
(its marker dropped); lines are joined and whitespace collapsed. A unit is split after ``.``, ``!``,
``?`` or ``…`` (and closing quotes or brackets) followed by space and a character that is not a
lower-case letter, except after an abbreviation (*e.g., i.e., et al., cf., vs., approx., ca.,
Dr.*; *Fig., Eq., No., Ref., p.* before a number), an initial followed by another (*J. H.*) or a
dotted abbreviation (*U.S.*). Decimals (*8.314*) contain no space, so they never split.

**Key terms** of a question (:func:`coverage`): each quantity part (weight 2; a quantity of the
table counts when one of its names or symbols appears, any other by the fraction of its words
present), the method (weight 2: as written, a compound name's parts in any order but not inside a
longer name, so *Kissinger* is not *Kissinger–Akahira–Sunose*; or its acronym, *OFW*), the
compared items (1.5 each) and the defined subject (2), both by the fraction of their words, and
every other content term (1). Terms are analysis tokens, the same as search uses.

**Addressed** (:func:`addresses`): some passage covers at least half of the key terms' weight.
:func:`select` returns nothing for a question no passage addresses.

**Stated values** (:func:`stated_values`): a mention of the asked quantity (name or symbol, not
after *uncertainty / error / change / difference ... of*) followed by a link (``= ≈ ~ :``, *is,
of, about, close to, gives ...*) and a number with a unit: ``Ea ≈ 150.3 kJ/mol``, *an activation
energy of about 80.6 kJ/mol*, ``102.9 ± 0.4 kJ/mol``, ``7.15 × 10⁴ J/mol``, ``−35 J mol⁻¹ K⁻¹``.
In an equation chain (``Ea = −R × slope ≈ 8.314 J mol⁻¹ K⁻¹ × 1.505 × 10⁴ K ≈ 125 kJ/mol``) the
value is the first number that is not part of an expression. A known quantity's value must carry
a unit of the same dimension as its typical units; any other quantity takes any unit (or none,
at the end of a clause). A restatement (*, or 59.7 kJ/mol*, *that is about 71.5 kJ/mol*) is a
second value.

**Selection** (:func:`select`), by kind. Every candidate shares a key term with the question;
candidates below half the best coverage are dropped; relevance (the search score of the passage)
adds to every score; a fragment (a sentence starting in lower case, such as *where k is ...*)
ranks lower; ties keep the order of the passages and sentences:

* value: sentences stating the asked quantity, scored by their own coverage, that of their
  document and section (the ``doc_id`` and headings) and of their passage; ranked up when they or
  their passage name the question's method and when they state a result (*gives, follows, is
  then, from the slope*, or the end of a calculation), down when the number is an input or quoted
  (*constructed, simulated, assumed, for example, typical, reported, used in the*, *a reaction
  with Ea = ...*; a clause *, which assumes ...,* describes a noun and does not count). The best
  sentence for each part of the quantity comes first, then the sentence that says how it was
  obtained (*slope, fit, plot, regression, dividing ...*) from the three before it or from the
  previous paragraph;
* methods: method names found in the passages: a capitalised name or acronym before a method word
  (*the Kissinger method, Friedman's method, Arrhenius plot, NEB calculation, Darcy flux
  approach*), coordinated names (*the Ozawa–Flynn–Wall and Friedman methods*), lists after
  *methods such as*, a lower-case name with its acronym (*nudged elastic band (NEB) method*) and
  lower-case names before *method, technique, approach, procedure, algorithm, test* or a *-scopy /
  -metry / -graphy* word (*two-point method*), found again only with their method word. Names with
  the same parts (*Ozawa–Flynn–Wall = Flynn–Wall–Ozawa*) or whose initials make an acronym
  (*OFW*) are one method, shown with its acronym and its most procedural word (*method* before
  *plot*, *analysis* ... *equation*). Each comes with the sentence that best says what it does: it
  names the method (with its method word), early, with a describing verb, or belongs to the
  method's own section (the method named first in the ``doc_id`` and headings). Methods are ordered
  by that sentence, their relevance and how many passages name them; lower-case family labels
  (*isoconversional method*) rank below names; a method whose only sentences already describe
  another is left out. The text is ``"<name>: <sentence>"``;
* explanation: sentences with a causal cue (*because, since, due to, so, therefore, thus, leads
  to, results in, means that, is why, reflects, arises from, explains, depends on, as a result,
  attributed to, accounts for ...*; weaker: *makes, allows, drives, if*);
* comparison: sentences naming two compared items, or one and a contrast cue (*whereas, unlike,
  than, while, compared with, differs, in contrast, instead, rather than, however*, *..., not
  ...*; weaker: *both, similar, same*); strongest, the items side by side in clauses of their
  own (*in A ...; in B ...*);
* definition: the sentence *X is the / a ...* first (X may be followed by its symbol: *X Re (or
  NRe) is the ...*), then *X is / refers to / describes / means ...* (not a passive *X is derived
  ...*, nor a value, *X is 40 L*), *... is called X*, *X, the ...*, then the other sentences
  naming X; a lead-in ending in a colon that the next passage's list completes (*X is performed
  as follows:*) ranks as a definition and brings the list's items, in order;
* general: the sentences that cover most key terms.

A kind that finds nothing falls back to the general selection.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from rar.evidence.analysis import STOP_WORDS, tokenize
from rar.science.questions import (
    PROPER_NAME,
    Question,
    lookup,
    quantity_parts,
    word_set,
    words_pattern,
)

__all__ = [
    "Picked",
    "addresses",
    "coverage",
    "normalise",
    "select",
    "sentences",
    "stated_values",
]


@dataclass(frozen=True, slots=True)
class Picked:
    """One selected sentence and the passage it came from."""

    text: str
    """The sentence; for a method, ``"<method name>: <sentence>"``."""
    ref: str
    """``doc_id#location`` of the passage."""
    score: float
    name: str | None = None
    """The method name (kind ``methods``)."""

    @property
    def quote(self) -> str:
        """The sentence itself: a substring of the passage after whitespace normalisation."""
        prefix = f"{self.name}: " if self.name else ""
        return self.text[len(prefix) :] if prefix and self.text.startswith(prefix) else self.text


def normalise(text: str) -> str:
    """``text`` with every run of whitespace made one space (how picks match passages)."""
    return " ".join(text.split())


# --- sentences ---------------------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_UNDERLINE = re.compile(r"^ {0,3}(?:=+|-+)\s*$")
_RULE = re.compile(r"^\s*(?:[-*_]\s*){3,}$|^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_BREAK = re.compile(r"([.!?…])([\"'”’)\]]*)(\s+)")
_ALWAYS_ABBREVIATIONS: Final = word_set(
    "e.g i.e al cf vs approx ca viz resp incl esp dr mr mrs ms prof st jr sr etc.al"
)
_NUMBERED_ABBREVIATIONS: Final = word_set(
    "fig figs eq eqs eqn no nos vol vols pp p ref refs sec ch chap tab art"
)


def _units_of(text: str) -> list[str]:
    """The prose units of a passage: paragraphs and list items, joined and collapsed."""
    units: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            units.append(normalise(" ".join(current)))
            current.clear()

    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    fence: str | None = None
    code = in_list = skip_next = False
    for index, raw in enumerate(lines):
        if skip_next:
            skip_next = False
            continue
        if fence is not None:
            if raw.strip().startswith(fence):
                fence = None
            continue
        opened = _FENCE.match(raw)
        if opened:
            flush()
            fence = opened.group(1)
            continue
        line = re.sub(r"^\s*>\s?", "", raw)
        stripped = line.strip()
        if not stripped:
            flush()
            code = False
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if code or (not current and raw.startswith(("    ", "\t")) and not in_list):
            code = True
            continue
        if _ATX.match(line) or stripped.startswith(("|", "<!--")) or _RULE.match(line):
            flush()
            continue
        if not current and _UNDERLINE.match(following) and not _ITEM.match(line):
            skip_next = True  # a setext heading and its underline
            continue
        item = _ITEM.match(line)
        if item:
            flush()
            in_list = True
            current.append(line[item.end() :])
            continue
        if not current and not raw.startswith((" ", "\t")):
            in_list = False
        current.append(stripped)
    flush()
    return units


def _ends_sentence(unit: str, dot: int, following: str) -> bool:
    before = unit[:dot]
    word_match = re.search(r"(\S+)$", before)
    word = word_match.group(1).lstrip("([\"'“‘") if word_match else ""
    low = word.casefold()
    if low in _ALWAYS_ABBREVIATIONS or re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", word):
        return False
    if low in _NUMBERED_ABBREVIATIONS and (following[:1].isdigit() or following[:1] == "("):
        return False
    return not (re.fullmatch(r"[A-Z]", word) and re.match(r"[A-Z]\.", following))


def sentences(text: str) -> list[str]:
    """The prose sentences of a passage, whitespace-normalised, in order (rules above)."""
    out: list[str] = []
    for unit in _units_of(text):
        start = 0
        for match in _BREAK.finditer(unit):
            following = unit[match.end() :]
            if not following or "a" <= following[0] <= "z":
                continue
            if match.group(1) == "." and not _ends_sentence(unit, match.start(1), following):
                continue
            piece = unit[start : match.end(2)].strip()
            if piece:
                out.append(piece)
            start = match.end()
        tail = unit[start:].strip()
        if tail:
            out.append(tail)
    return [s for s in out if re.search(r"[^\W\d_]", s)]


# words that name a family of methods rather than one method
_FAMILY_WORDS: Final = frozenset(
    [
        "isoconversional",
        "integral",
        "differential",
        "model",
        "free",
        "fitting",
        "numerical",
        "graphical",
        "analytical",
        "experimental",
        "computational",
        "statistical",
        "empirical",
        "iterative",
        "direct",
        "indirect",
        "kinetic",
        "thermal",
        "classical",
        "conventional",
        "standard",
    ]
)


def _headings(text: str) -> str:
    lines = text.split("\n")
    found = [re.sub(r"^ {0,3}#{1,6}\s*", "", ln) for ln in lines if _ATX.match(ln)]
    found += [lines[i] for i in range(len(lines) - 1) if _UNDERLINE.match(lines[i + 1])]
    return " ".join(found)


# --- numbers and units -------------------------------------------------------------------------

_SUPER = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺−", "0123456789-+-")
_SUP = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_POWER = rf"(?:\s*[×x·]\s*10(?:\^\(?([-−+]?\d+)\)?|([⁻⁺]?[{_SUP}]+))|[eE]([-+−]?\d+)(?![\w]))"
_NUMBER = re.compile(
    rf"(?<![\w.^/])([-−]?)(?:10(?:([⁻⁺]?[{_SUP}]+)|\^([-−+]?\d+))|(\d+(?:\.\d+)?){_POWER}?)"
)
_PLUS_MINUS = re.compile(rf"\s*±\s*\d+(?:\.\d+)?{_POWER}?")
_RANGE = re.compile(r"\s*(?:–|-|to|and)\s*(?=[-−]?\d)")
_APPROX = re.compile(r"(?:(?:about|approximately|approx\.|roughly|around|nearly|some|~|∼|≈)\s*)+")

# unit atoms and their dimensions ("energy amount^-1" is per mole); SI prefixes are added below
_UNIT_TABLE: Final = """
J cal eV erg = energy
mol = amount
K °C °F kelvin = temperature
s min h hr d yr y day days hour hours minute minutes second seconds week weeks year years = time
m Å au AU pc ly ft mi = length
L = length^3
M = amount length^-3
g lb M☉ M⊙ = mass
Pa bar atm Torr mmHg psi = pressure
Hz rpm = time^-1
W = energy time^-1
V = voltage
Ω = voltage current^-1
S = current voltage^-1
N = force
% ‰ percent ppm ppb = fraction
dB = level
mag = magnitude
Jy = flux
U = activity
"""


def _parse_units(table: str) -> dict[str, dict[str, int]]:
    units: dict[str, dict[str, int]] = {}
    for line in table.strip().splitlines():
        atoms, dimension = line.split(" = ")
        parsed = {}
        for factor in dimension.split():
            name, _, power = factor.partition("^")
            parsed[name] = int(power or "1")
        units.update(dict.fromkeys(atoms.split(), parsed))
    return units


_DIMENSIONS: Final = _parse_units(_UNIT_TABLE)
_PREFIXABLE: Final = word_set("J cal eV mol s m g L M Pa Hz W V Ω S N bar yr pc")
_PREFIXES: Final = "YZEPTGMkhdcmµμnpfa"
_ATOM = re.compile(
    rf"(°[CF]|[%‰]|[A-Za-zµμΩÅ]+[☉⊙]?)((?:\^\(?[-−+]?\d+\)?|[⁻⁺]?[{_SUP}]+|[-−][1-4](?![\d.]))?)"
)

Signature = tuple[tuple[str, int], ...]


def _atom_dimension(atom: str) -> dict[str, int] | None:
    if atom in _DIMENSIONS:
        return _DIMENSIONS[atom]
    if len(atom) > 1 and atom[0] in _PREFIXES and atom[1:] in _PREFIXABLE:
        return _DIMENSIONS[atom[1:]]
    return None


def _atom_at(text: str, at: int) -> tuple[int, dict[str, int], int] | None:
    match = _ATOM.match(text, at)
    if not match:
        return None
    dimension = _atom_dimension(match.group(1))
    if dimension is None:
        return None
    power = int(match.group(2).translate(_SUPER).strip("^()") or "1") if match.group(2) else 1
    return match.end(), dimension, power


def _unit_at(text: str, at: int) -> tuple[str, int, Signature]:
    """The unit written at ``text[at:]`` (after at most one space), its end and dimension."""
    start = at + 1 if text[at : at + 1] in (" ", "\u00a0", "\u2009", "\u202f") else at
    first = _atom_at(text, start)
    if first is None or (start == at and first[0] - start < 2 and text[start] not in "%‰°K"):
        return "", at, ()
    total: dict[str, int] = {}

    def add(dimension: dict[str, int], power: int) -> None:
        for name, exponent in dimension.items():
            total[name] = total.get(name, 0) + exponent * power

    end, dimension, power = first
    add(dimension, power)
    while True:
        if text[end : end + 2] == "/(":
            close = text.find(")", end)
            if close < 0:
                break
            inner, ok = end + 2, True
            while inner < close:
                atom = _atom_at(text, inner)
                if atom is None:
                    ok = False
                    break
                add(atom[1], -atom[2])
                inner = atom[0]
                while inner < close and text[inner] in " ·⋅":
                    inner += 1
            if not ok:
                break
            end = close + 1
        elif text[end : end + 1] in ("/", "·", "⋅"):
            atom = _atom_at(text, end + 1)
            if atom is None:
                break
            add(atom[1], -atom[2] if text[end] == "/" else atom[2])
            end = atom[0]
        elif text[end : end + 1] == " ":
            atom = _atom_at(text, end + 1)
            if atom is None or not _ATOM.match(text, end + 1).group(2):  # type: ignore[union-attr]
                break
            add(atom[1], atom[2])
            end = atom[0]
        else:
            break
    signature = tuple(sorted((k, v) for k, v in total.items() if v))
    return text[start:end], end, signature


def _number_at(text: str, at: int) -> tuple[float, int] | None:
    match = _NUMBER.match(text, at)
    if not match:
        return None
    sign = -1.0 if match.group(1) else 1.0
    if match.group(4) is None:
        exponent = (match.group(2) or match.group(3) or "0").translate(_SUPER)
        return sign * 10.0 ** int(exponent), match.end()
    mantissa = float(match.group(4))
    power = match.group(5) or match.group(6) or match.group(7)
    if power:
        mantissa *= 10.0 ** int(power.translate(_SUPER))
    return sign * mantissa, match.end()


@dataclass(frozen=True, slots=True)
class _Value:
    values: tuple[float, ...]
    unit: str
    signature: Signature
    end: int


def _value_at(text: str, at: int) -> _Value | None:
    approx = _APPROX.match(text, at)
    at = approx.end() if approx else at
    number = _number_at(text, at)
    if number is None:
        return None
    values, end = [number[0]], number[1]
    spread = _PLUS_MINUS.match(text, end)
    if spread:
        end = spread.end()
    joined = _RANGE.match(text, end)
    if joined and not spread:
        second = _number_at(text, joined.end())
        if second is not None:
            values.append(second[0])
            end = second[1]
    unit, unit_end, signature = _unit_at(text, end)
    return _Value(tuple(values), unit, signature, unit_end if unit else end)


def _signatures(units: Iterable[str]) -> frozenset[Signature]:
    found = set()
    for unit in units:
        _, _, signature = _unit_at(unit, 0)
        if signature:
            found.add(signature)
    return frozenset(found)


# --- key terms and coverage --------------------------------------------------------------------

_GENERIC_METHOD_TOKENS: Final = word_set(
    "method analysis plot equation approach technique calculation construction procedure "
    "algorithm model data"
)


@dataclass(frozen=True, slots=True)
class _Key:
    weight: float
    tokens: frozenset[str]
    patterns: tuple[re.Pattern[str], ...]
    partial: bool = False
    """Count the fraction of the words present (a phrase outside the quantity table)."""

    def present(self, text: str, tokens: frozenset[str]) -> bool:
        share = self.share(text, tokens)
        return share == 1 or (self.partial and share > 0)

    def share(self, text: str, tokens: frozenset[str]) -> float:
        if (self.tokens and self.tokens <= tokens) or any(p.search(text) for p in self.patterns):
            return 1.0
        if self.partial and self.tokens:
            return len(self.tokens & tokens) / len(self.tokens)
        return 0.0


def _symbol_pattern(symbol: str) -> str:
    return rf"(?<![\w]){re.escape(symbol)}[₀-₉ᵢⱼ]*(?![\w-])"


@functools.lru_cache(maxsize=256)
def _quantity_pattern(part: str) -> re.Pattern[str]:
    """A quantity in words (any case, plurals) or by one of its symbols (exact case)."""
    known = lookup(part)
    if known is None:
        return re.compile(rf"(?i:\b{words_pattern(part)}\b)")
    words = [n for n in (known.name, *known.names) if n not in known.symbols]
    alternatives = [rf"(?i:\b{words_pattern(n)}\b)" for n in words]
    alternatives += [_symbol_pattern(s) for s in known.symbols]
    return re.compile("|".join(alternatives))


def _acronym(name: str) -> str | None:
    parts = [p for p in re.split(r"[\s–—-]+", name) if p]
    if len(parts) < 2:
        return None
    return "".join(p[0] for p in parts).upper()


@functools.lru_cache(maxsize=1024)
def _method_pattern(method: str, *, spelled: bool = True) -> re.Pattern[str]:
    """A named method as written: its parts in any order (not inside a longer hyphenated name),
    its acronym, or for an acronym (``spelled``) the words it abbreviates, three letters or more
    each (``NEB``: *nudged elastic band*)."""
    parts = [p for p in re.split(r"[\s–—-]+", method) if p]
    alternatives = []
    if len(parts) == 1 and parts[0].isupper() and len(parts[0]) >= 2:
        alternatives.append(rf"(?<![\w]){re.escape(parts[0])}(?![\w])")
        if spelled and len(parts[0]) >= 3:
            words = r"[\s–—-]+".join(rf"{re.escape(c)}\w{{2,}}" for c in parts[0].lower())
            alternatives.append(rf"(?i:\b{words}\b)")
    elif method[:1].isupper():
        for order in itertools.permutations(parts[:4]):
            joined = r"[\s–—-]+".join(re.escape(p) for p in order)
            alternatives.append(rf"(?i:(?<![\w–—-]){joined}(?!\w|[–—-]\w))")
        acronym = _acronym(method)
        if acronym:
            alternatives.append(rf"(?<![\w]){acronym}(?![\w])")
    else:
        alternatives.append(rf"(?i:\b{words_pattern(method)}\b)")
    return re.compile("|".join(alternatives))


@functools.lru_cache(maxsize=256)
def _keys(question: Question) -> tuple[_Key, ...]:
    keys: list[_Key] = []
    covered: set[str] = set()
    for part in quantity_parts(question.quantity) if question.quantity else ():
        tokens = frozenset(tokenize(part))
        tabled = lookup(part) is not None
        # a known quantity counts by a name or symbol, not by its words scattered in a sentence
        keys.append(
            _Key(2.0, frozenset() if tabled else tokens, (_quantity_pattern(part),), not tabled)
        )
        covered |= tokens
    if question.method:
        keys.append(_Key(2.0, frozenset(), (_method_pattern(question.method),)))
        covered |= frozenset(tokenize(question.method))
    for item in question.compared:
        tokens = frozenset(tokenize(item)) - _GENERIC_METHOD_TOKENS or frozenset(tokenize(item))
        known = lookup(item)
        patterns = (_quantity_pattern(item),) if known else ()
        keys.append(_Key(1.5, tokens, patterns, partial=not known))
        covered |= frozenset(tokenize(item))
    if question.subject and not lookup(question.subject):
        tokens = frozenset(tokenize(question.subject)) - covered
        if tokens:
            keys.append(_Key(2.0, tokens, (), partial=True))
            covered |= tokens
    keys += [_Key(1.0, frozenset({t}), ()) for t in question.terms if t not in covered]
    return tuple(keys)


def _coverage(keys: tuple[_Key, ...], text: str, tokens: frozenset[str]) -> float:
    total = sum(k.weight for k in keys)
    if not total:
        return 0.0
    return sum(k.weight * k.share(text, tokens) for k in keys) / total


def coverage(question: Question, text: str) -> float:
    """The weighted fraction (0..1) of the question's key terms present in ``text``."""
    return _coverage(_keys(question), text, frozenset(tokenize(text)))


def addresses(question: Question, passages: Mapping[str, str]) -> bool:
    """Whether some passage covers at least half of the question's key terms (by weight)."""
    return any(coverage(question, text) >= 0.5 for text in passages.values())


# --- stated values -----------------------------------------------------------------------------

_QUALIFIED = re.compile(
    r"\b(?:uncertaint(?:y|ies)|errors?|deviations?|changes?|differences?|shifts?|variations?|"
    r"increases?|decreases?|bias|spread|scatter|precision|excess|dependence)\s+(?:of|in|on)\s+"
    r"(?:the\s+|its\s+|an?\s+|their\s+)?(?:\w+\s+){0,2}$",
    re.IGNORECASE,
)
_LINK = re.compile(
    r"\s*(?:([=≈∼≃≅~:≤≥<>])|\b(of|is|are|was|were|equals?|lies|becomes|gives|yields|between|"
    r"ranges|falls?|comes out at|amounts to)\b|\b(?:be|been|equal to|to be|about|approximately|"
    r"approx\.|roughly|around|nearly|close to|near|some|just|then|here|thus|therefore|also|now|"
    r"only|typically|usually|commonly|often|found|reported|measured|obtained|calculated|computed|"
    r"estimated|determined|given by|as|the|a|an|value|values|from)\b)",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(
    r";|\s(?:while|whereas|but|where)\s|,\s(?!(?:or|that is|i\.e\.|about|approximately|roughly|"
    r"equivalently)\b)"
)
_RESTATED = re.compile(
    r",?\s*(?:or|that is|i\.e\.,?|equivalently|corresponding to)\s+", re.IGNORECASE
)
_QUALIFIER = re.compile(  # "the half-life of carbon-14 is ...": what the quantity is of
    r"\s+(?:of|for|in|at)\s+(?!\d)[^,;=≈∼~]{1,40}?(?=\s+(?:is|are|was|were|equals)\b|\s*[=≈∼~])"
)
_APPOSITIVE = re.compile(  # "the barrier is the energy of the top image, 0.86 eV"
    r"\s+(?:is|are|was|were)\s+(?:the|an?)\s+[^,.;=≈]{1,60}?,\s+"
    r"(?=[-−]?\d|(?:about|approximately|roughly|~|≈)\s*[-−]?\d)"
)
_OPERATOR = re.compile(r"^\s*[×x·/+*−-]\s*[\w(√]")
_PROSE = re.compile(
    r"(?<![\w])(?!(?:ln|log|exp|sin|cos|tan|sqrt)\b)[A-Za-z]{3,}\s+"
    r"(?!(?:ln|log|exp)\b)[A-Za-z]{3,}"
)


@dataclass(frozen=True, slots=True)
class _Stated:
    values: tuple[float, ...]
    unit: str
    derived: bool  # the value ends a calculation
    mention: int
    part: int = 0  # which part of the asked quantity


def _accepts(value: _Value, signatures: frozenset[Signature] | None, rest: str) -> bool:
    if signatures is None:
        return bool(value.unit) or not rest.strip() or rest.lstrip()[:1] in ".,;)"
    return value.signature in signatures


_CHAIN_CHARS: Final = 400  # an equation chain longer than this states nothing readable
_CHAIN_STEPS: Final = 8


def _chain(text: str, at: int, signatures: frozenset[Signature] | None) -> list[_Stated]:
    window = text[at : at + _CHAIN_CHARS]
    end = _CLAUSE_END.search(window)
    clause = window[: end.start() if end else len(window)]
    pieces = re.split(r"\s*[=≈∼≃≅]\s*", clause, maxsplit=_CHAIN_STEPS)
    for index, piece in enumerate(pieces):
        piece = piece.strip().lstrip("~∼").strip()
        value = _value_at(piece, 0)
        if value is not None and not _OPERATOR.match(piece[value.end :]):
            if not _accepts(value, signatures, piece[value.end :]):
                return []
            found = [_Stated(value.values, value.unit, index > 0, at)]
            restated = _RESTATED.match(piece, value.end)
            if restated and not found[0].derived:
                again = _chain(
                    piece + " = " + " = ".join(pieces[index + 1 :]), restated.end(), signatures
                )
                found += [_Stated(s.values, s.unit, True, at) for s in again]
            elif restated:
                again = _chain(piece, restated.end(), signatures)
                found += [_Stated(s.values, s.unit, True, at) for s in again]
            return found
        if _PROSE.search(piece):
            return []
    return []


def _target(part: str) -> tuple[re.Pattern[str], frozenset[Signature] | None]:
    known = lookup(part)
    signatures = _signatures(known.units) if known and known.units else None
    return _quantity_pattern(part), signatures


def _stated(question: Question, sentence: str) -> list[_Stated]:
    found: list[_Stated] = []
    for number, part in enumerate(quantity_parts(question.quantity) if question.quantity else ()):
        pattern, signatures = _target(part)
        for mention in pattern.finditer(sentence):
            if _QUALIFIED.search(sentence[: mention.start()]):
                continue
            at = mention.end()
            aside = re.match(r"\s*\([^()]{0,40}\)|\s+[^\s=≈]{1,6}(?=\s*[=≈∼~])", sentence[at:])
            if aside:
                at += aside.end()
            linked, steps = False, 0
            qualifier = _QUALIFIER.match(sentence, at)
            if qualifier:
                at = qualifier.end()
            appositive = _APPOSITIVE.match(sentence, at)
            if appositive:
                at, linked, steps = appositive.end(), True, 6
            while steps < 6:
                link = _LINK.match(sentence, at)
                if not link or link.end() == at:
                    break
                linked = linked or bool(link.group(1) or link.group(2))
                at, steps = link.end(), steps + 1
            if linked:
                found += [
                    _Stated(v.values, v.unit, v.derived, mention.start(), number)
                    for v in _chain(sentence, at, signatures)
                ]
    return found


def stated_values(question: Question, text: str) -> list[tuple[str, float, str]]:
    """``(sentence, value, unit)`` for each number stated for the asked quantity in ``text``."""
    out: list[tuple[str, float, str]] = []
    for sentence in sentences(text):
        for stated in _stated(question, sentence):
            for value in stated.values:
                entry = (sentence, value, stated.unit)
                if entry not in out:
                    out.append(entry)
    return out


# --- selection ---------------------------------------------------------------------------------

_CAUSAL_STRONG = re.compile(
    r"\b(?:because|since(?!\s+\d)|due to|owing to|therefore|thus|hence|consequently|"
    r"leads? to|led to|results? in|resulting in|as a result|means that|which means|is why|"
    r"reflects?|arises? from|arising from|explains?|explained by|depends? on|dependent on|"
    r"caused by|causes?|gives? rise to|accounts? for|attributed to|attributes|stems? from|"
    r"responsible for|so that|(?:inversely )?proportional to|scales? with)\b|(?:^|[,;:]\s*)so\b",
    re.IGNORECASE,
)
_CAUSAL_WEAK = re.compile(r"\b(?:makes?|made|allows?|drives?|controls?|governs?|if)\b", re.I)
_CONTRAST = re.compile(
    r"\b(?:whereas|unlike|than|while|compared (?:with|to)|differs?|different|difference|"
    r"in contrast|by contrast|instead|rather than|however|on the other hand)\b",
    re.IGNORECASE,
)
_LIKENESS = re.compile(r"\b(?:both|similar|same|alike|equally|likewise)\b", re.IGNORECASE)
_RESULT = re.compile(
    r"\b(?:gives?|gave|giving|yields?|yielded|follows|obtained|we (?:find|obtain|get)|"
    r"results? in|is then|comes out|returns?|fitted|fit of|from the slope|least-squares|"
    r"regression)\b",
    re.IGNORECASE,
)
_QUOTED = re.compile(
    r"\b(?:constructed|simulated|assum(?:e|ed|es|ing|ption)|illustrative|hypothetical|"
    r"suppose|for example|e\.g\.|such as|typical(?:ly)?|reported|published|literature|"
    r"used in the|described in|see the|rule of thumb|would)\b",
    re.IGNORECASE,
)
_HOW = re.compile(
    r"\b(?:slope|fit(?:ted|ting)?|plot(?:ted|ting)?|regression|against|dividing|multiplying|"
    r"intercept|least-squares|obtained by|derived from|computed from|calculated from|using)\b",
    re.IGNORECASE,
)
_DESCRIBES = re.compile(
    r"\b(?:is|are|estimates?|determines?|gives?|uses?|relates?|plots?|applies|measures?|"
    r"computes?|finds?|compares?|derives?|obtains?|returns?|maps?|locates?|fits?|follows|"
    r"represents?|describes?|separates?|extracts?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class _Sentence:
    ref: str
    index: int
    text: str
    tokens: frozenset[str]
    coverage: float
    relevance: float

    @property
    def fragment(self) -> bool:
        """A sentence starting in lower case continues a formula or list ("where k is ...")."""
        return self.text[:1].islower()


def _candidates(
    question: Question,
    passages: Mapping[str, str],
    relevance: Mapping[str, float],
    *,
    by_passage: bool = False,
    titles: Mapping[str, str] | None = None,
    keep_all: bool = False,
) -> list[_Sentence]:
    """Sentences sharing a key term with the question; with ``by_passage``, also the sentences
    of a passage whose heading or document title does ("## Vickers hardness" over "The Vickers
    test uses …"), at half their coverage."""
    keys = _keys(question)
    out = []
    for ref, text in passages.items():
        heading = " ".join(
            [(titles or {}).get(ref, "")]
            + [
                line.lstrip("#").strip()
                for line in text.splitlines()
                if line.lstrip().startswith("#")
            ]
        )
        whole = _coverage(keys, heading, frozenset(tokenize(heading))) if by_passage else 0.0
        for index, sentence in enumerate(sentences(text)):
            tokens = frozenset(tokenize(sentence))
            share = max(_coverage(keys, sentence, tokens), 0.5 * whole)
            if share > 0 or keep_all:
                out.append(_Sentence(ref, index, sentence, tokens, share, relevance.get(ref, 0.0)))
    return out


def _ranked(scored: list[tuple[float, _Sentence]], floor: float = 0.5) -> list[Picked]:
    """Best first (ties in passage and sentence order), without weak or repeated sentences."""
    if not scored:
        return []
    best = max(s.coverage for _, s in scored)
    order = {ref: i for i, ref in enumerate(dict.fromkeys(s.ref for _, s in scored))}
    kept = sorted(
        ((score - 0.3 * s.fragment, s) for score, s in scored if s.coverage >= floor * best),
        key=lambda pair: (-pair[0], order[pair[1].ref], pair[1].index),
    )
    picks: list[Picked] = []
    seen: set[str] = set()
    for score, s in kept:
        if s.text not in seen:
            seen.add(s.text)
            picks.append(Picked(s.text, s.ref, round(score, 4)))
    return picks


def _doc_text(ref: str, text: str) -> str:
    return f"{ref.split('#', 1)[0].replace('-', ' ').replace('/', ' ')} {_headings(text)}"


def _select_general(cands: list[_Sentence]) -> list[Picked]:
    return _ranked([(s.coverage + 0.3 * s.relevance, s) for s in cands], floor=0.6)


def _select_value(
    question: Question, cands: list[_Sentence], passages: Mapping[str, str]
) -> list[Picked]:
    method = None
    if question.method:
        method = _Key(2.0, frozenset(), (_method_pattern(question.method),))
    scored: list[tuple[float, _Sentence]] = []
    parts: dict[str, set[int]] = {}
    for s in cands:
        stated = _stated(question, s.text)
        if not stated:
            continue
        topic, passage = _doc_text(s.ref, passages[s.ref]), passages[s.ref]
        score = (
            0.5 * s.coverage
            + 0.5 * coverage(question, topic)
            + 0.25 * coverage(question, passage)
            + 0.5
            + 0.3 * s.relevance
        )
        if method is not None:
            if method.present(s.text, s.tokens):
                score += 0.4
            elif method.present(f"{topic} {passage}", frozenset()):
                score += 0.3
        before = s.text[: min(v.mention for v in stated)]
        # a non-restrictive clause (", which assumes ...,") describes a noun, not the number
        plain = re.sub(r",\s+(?:which|who)\b[^,]*,", ",", s.text)
        if _QUOTED.search(plain) or re.search(r"\bwith\s+(?:an?\s+|the\s+)?(?:\w+\s+)?$", before):
            score -= 0.7  # an input or a number quoted from elsewhere
        elif _RESULT.search(s.text) or any(v.derived for v in stated):
            score += 0.5  # the passage's own result
        scored.append((score, s))
        parts[s.text] = {v.part for v in stated}
    ranked = _ranked(scored, floor=0.0)
    if not ranked:
        return []
    # the best sentence for each part of the quantity first ("enthalpy and entropy of ...")
    lead: list[Picked] = []
    for part in range(len(quantity_parts(question.quantity or ""))):
        best = next((p for p in ranked if part in parts[p.text]), None)
        if best is not None and best not in lead:
            lead.append(best)
    picks = [*lead, *(p for p in ranked if p not in lead)]
    head = len(lead) or 1
    top = next(s for _, s in scored if s.text == picks[0].text and s.ref == picks[0].ref)
    previous = _previous_ref(top.ref)
    how = [
        (s.coverage - 0.05 * (top.index - s.index if s.ref == top.ref else 1 + s.index), s)
        for s in cands
        if ((s.ref == top.ref and top.index - 3 <= s.index < top.index) or s.ref == previous)
        and _HOW.search(s.text)
        and s.text != top.text
    ]
    if how:
        best_how = max(how, key=lambda pair: (pair[0], -pair[1].index))[1]
        step = Picked(best_how.text, best_how.ref, round(picks[head - 1].score - 0.01, 4))
        rest = [p for p in picks[head:] if p.text != step.text]
        return [*picks[:head], step, *rest]
    return picks


def _previous_ref(ref: str) -> str | None:
    match = re.fullmatch(r"(.*#paragraph_)(\d+)", ref)
    return f"{match.group(1)}{int(match.group(2)) - 1}" if match else None


# a sentence that opens with its cause: it explains the sentence before it
_STARTS_CAUSE = re.compile(
    r"^(?:because|since|this is because|that is because|the reason is|the reason for this|"
    r"this happens because|this occurs because|owing to|due to)\b",
    re.IGNORECASE,
)


def _select_explanation(
    question: Question, cands: list[_Sentence], passages: Mapping[str, str]
) -> list[Picked]:
    scored = []
    keys = _keys(question)
    # a cause in a section about the question's subject ("## Narrow temperature ranges")
    section = {
        ref: _coverage(keys, _headings(text), frozenset(tokenize(_headings(text))))
        for ref, text in passages.items()
    }
    for s in cands:
        cue = 0.4 if _CAUSAL_STRONG.search(s.text) else 0.2 if _CAUSAL_WEAK.search(s.text) else 0
        if cue:
            scored.append((s.coverage + cue + 0.3 * s.relevance + 0.3 * section[s.ref], s))
    # a sentence that states the question's subject is often followed by the one giving its
    # cause ("Many … are artefacts … . Because the fitted values … are correlated, …"): that
    # cause answers the why, though it repeats none of the question's words
    seen = {(s.ref, s.text) for _score, s in scored}
    for s in cands:
        if s.coverage < 0.5 or _CAUSAL_STRONG.search(s.text):
            continue
        following = sentences(passages.get(s.ref, ""))[s.index + 1 : s.index + 2]
        for text in following:
            if (s.ref, text) in seen or not _STARTS_CAUSE.match(text):
                continue
            follower = _Sentence(
                s.ref, s.index + 1, text, frozenset(tokenize(text)), s.coverage, s.relevance
            )
            scored.append((0.9 * s.coverage + 0.35 + 0.3 * s.relevance, follower))
            seen.add((s.ref, text))
    return _ranked(scored)


# "a fixed amount, not a fixed fraction": a contrast within one clause
_NOT_THAT = re.compile(r",\s+not\s+(?:a|an|the|its|their)?\s*\w+", re.IGNORECASE)


def _parallel(items: list[_Key], text: str) -> bool:
    """Whether the sentence sets the items side by side in clauses of their own ("A refers to
    …; B refers to …"): two clauses joined by a semicolon, each naming an item the other does
    not."""
    clauses = [c for c in text.split(";") if c.strip()]
    if len(clauses) < 2:
        return False
    named = [  # the whole item ("true stress"), not a word it shares with the other ("stress")
        {i for i, k in enumerate(items) if k.share(c, frozenset(tokenize(c))) == 1} for c in clauses
    ]
    return any(a - b and b - a for a, b in itertools.combinations(named, 2))


def _select_comparison(question: Question, cands: list[_Sentence]) -> list[Picked]:
    items = [k for k in _keys(question) if k.weight == 1.5]
    scored = []
    for s in cands:
        named = sum(1 for k in items if k.present(s.text, s.tokens))
        contrast = 0.4 if _CONTRAST.search(s.text) else 0.2 if _LIKENESS.search(s.text) else 0.0
        if named >= 2 and _parallel(items, s.text):
            contrast = max(contrast, 0.5)
        elif _NOT_THAT.search(s.text):
            contrast = max(contrast, 0.3)
        if named >= 2 or (named == 1 and contrast) or (not items and contrast):
            score = (1.0 if named >= 2 else 0.4) + contrast + 0.5 * s.coverage
            scored.append((score + 0.3 * s.relevance, s))
    return _ranked(scored, floor=0.3)


_LIST_LINE = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+\S")
_MAX_STEPS = 8


def _next_ref(ref: str) -> str | None:
    match = re.fullmatch(r"(.*#paragraph_)(\d+)", ref)
    return f"{match.group(1)}{int(match.group(2)) + 1}" if match else None


def _list_after(ref: str, passages: Mapping[str, str]) -> str | None:
    """The ref of the passage after ``ref`` when that passage is a list (numbered or bulleted
    lines, with their continuation lines), else None."""
    following = _next_ref(ref)
    lines = [line for line in passages.get(following or "", "").splitlines() if line.strip()]
    if not lines or not _LIST_LINE.match(lines[0]):
        return None
    if not all(_LIST_LINE.match(line) or line.startswith((" ", "\t")) for line in lines):
        return None
    return following


def _with_steps(picks: list[Picked], passages: Mapping[str, str]) -> list[Picked]:
    """A definition that introduces a list ("X is found as follows:") is the list: its items,
    in the order the passage after it gives them, follow it (a procedure, a set of criteria)."""
    out: list[Picked] = []
    taken: set[str] = set()
    for rank, pick in enumerate(picks):
        if pick.text in taken:
            continue
        out.append(pick)
        taken.add(pick.text)
        introduces = rank < 2 and pick.text.rstrip().endswith(":")
        following = _list_after(pick.ref, passages) if introduces else None
        if following is None:
            continue  # not a lead-in, or no list right after it
        for index, item in enumerate(sentences(passages[following])[:_MAX_STEPS]):
            if item not in taken:
                out.append(Picked(item, str(following), round(pick.score - 0.001 * (index + 1), 4)))
                taken.add(item)
    return out


def _select_definition(
    question: Question, cands: list[_Sentence], passages: Mapping[str, str]
) -> list[Picked]:
    subject = question.subject or question.quantity or question.method
    if not subject:
        return []
    words = [w for w in subject.split() if w.casefold() not in ("the", "a", "an")]
    known = lookup(subject)
    if known:
        term = _quantity_pattern(known.name).pattern
    else:
        term = rf"(?i:\b{words_pattern(' '.join(words))}\b)"
    passive = r"(?!(?:\w+ly\s+)?(?:\w+ed|written|known|given|taken|seen|shown|found|made)\b)"
    # "X is 40 L", "X is about 0.6 L/kg": the value in one case, not what X is
    value = r"(?!(?:about|approximately|roughly|around|nearly|some|typically|only)?\s*[-−+~≈]?\d)"
    verbs = (
        rf"(?:(?:is|are|was|were)\s+(?:defined|known)\s+as|(?:is|are|was|were)\s+{passive}{value}|"
        r"refers? to|means?|denotes?|describes?|represents?|measures?|gives?|estimates?|"
        r"determines?|relates?|states?|expresses|quantifies)"
    )
    # the term may be followed by its symbol ("The volume of distribution V (or Vd) is the …",
    # "The activation energy Ea is …"): a short token led by a capital or Greek letter, or one
    # lower-case letter, with subscripts
    symbol = r"(?:\s+(?:[A-ZΑ-Ωα-ωΔ][\w\u2080-\u2089½‡′]{0,3}|[a-z][\u2080-\u2089½]?)(?=[\s(,]))?"
    opening = (
        rf"^(?:[^,.;]{{0,40}},\s*)?(?:(?i:the|a|an)\s+)?(?:\w+\s+)?(?:{term}){symbol}"
        r"(?:\s*\([^)]*\))?(?:,[^.;]{0,200}?,)?\s+"
    )
    defining = re.compile(rf"{opening}(?i:{verbs})")
    classic = re.compile(rf"{opening}(?i:is|are)\s+(?i:the|an?|one)\b")
    apposition = re.compile(rf"(?:{term}),\s+(?i:the|a|an|also called|also known as|or)\b")
    called = re.compile(
        rf"(?i:called|known as|termed|referred to as)\s+(?:(?i:the|a|an)\s+)?(?:{term})"
    )
    mention = re.compile(term)
    scored = []
    for s in cands:
        if not mention.search(s.text):
            continue
        if classic.search(s.text):
            form = 1.2  # "X is the / a ..."
        elif defining.search(s.text):
            form = 1.0
        else:
            form = 0.7 if called.search(s.text) else 0.6 if apposition.search(s.text) else 0.0
        # "… is found as follows:" says nothing by itself, but with the list after it (the
        # steps of a procedure) it is the definition
        lead_in = 0.0
        if s.text.rstrip().endswith(":"):
            lead_in = -0.2 if _list_after(s.ref, passages) is not None else 0.6
        scored.append((form + s.coverage + 0.3 * s.relevance - lead_in, s))
    return _with_steps(_ranked(scored, floor=0.0), passages)


# --- method names ------------------------------------------------------------------------------

_WORD_RE = (
    r"(methods?|analys[ie]s|plots?|equations?|approach(?:es)?|techniques?|calculations?|"
    r"construction|procedures?|algorithms?|variant|tests?|[a-z]+(?:scopy|metry|graphy))"
)
_LOWER_WORD_RE = (
    r"(methods?|techniques?|approach(?:es)?|procedures?|algorithms?|tests?|"
    r"[a-z]+(?:scopy|metry|graphy))"
)
_SINGULAR: Final = {
    plural: plural[:-2]
    if plural.endswith(("ches", "ses")) and plural != "analyses"
    else plural[:-1]
    for plural in word_set("methods plots equations approaches techniques calculations procedures")
    | word_set("algorithms tests")
} | {"analyses": "analysis"}
_PREFERENCE: Final = (
    "method",
    "plot",
    "analysis",
    "approach",
    "technique",
    "procedure",
    "algorithm",
    "calculation",
    "construction",
    "test",
    "variant",
    "equation",
)
_PROPER_METHOD = re.compile(
    rf"(?<![\w–—-])((?:{PROPER_NAME})(?:\s+{PROPER_NAME}){{0,2}})(?:['’]s)?(?:-(?:type|like|based))?"
    rf"(?:\s+\(([A-Z][A-Za-z]*[A-Z])\))?"
    rf"(?:\s+(?!(?:and|or|of|the|a|an|to|in|is|are|for|with|by|as)\b)([a-z][a-z-]+))?"
    rf"\s+{_WORD_RE}\b"
)
_ACRONYM_METHOD = re.compile(
    rf"(?<![\w-])((?:[a-z][\w-]*\s+){{0,3}}[a-z][\w-]*)\s+\(([A-Z][A-Za-z-]*[A-Z])\)\s+{_WORD_RE}\b"
)
# "the concentration approaches its steady state", "the laboratory tests the samples": a verb
# with its object, not a method
_VERB_OBJECT = r"(?!\s+(?:its|the|a|an|their|this|that|these|those|zero|infinity|\d))"
_LOWER_METHOD = re.compile(
    rf"(?<![\w-])((?:[a-z][\w-]*\s+){{1,3}}){_LOWER_WORD_RE}\b{_VERB_OBJECT}"
)
_SUCH_AS = re.compile(rf"\b{_WORD_RE}\s+(?:such as|like|including|e\.g\.,?|namely)\s+")
_LIST_ITEM = re.compile(rf"(?:the\s+)?({PROPER_NAME})(?:['’]s)?(?:\s+{_WORD_RE}\b)?")
_LIST_SEPARATOR = re.compile(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+")
_COORDINATED = re.compile(rf"(?<![\w–—-])({PROPER_NAME})(?:['’]s)?(?:,\s*|,?\s+(?:and|or)\s+)$")
_NOT_A_NAME: Final = word_set(
    """
    same this that such other another new simple simplest simpler standard following above
    previous first related closely whole general common usual modern classic widely used popular
    main basic present particular given proposed original latter former specific different
    various several many most more less accurate better best quick good reliable suitable called
    known named termed applied based measured performed carried described obtained developed
    proposed recommended their its plain complementary alternative independent additional
    """
)


@dataclass(frozen=True, slots=True)
class _Name:
    base: str
    word: str
    acronym: str | None
    proper: bool
    modifier: str = ""
    """A lower-case word between a name and its method word ("Darcy flux approach")."""

    @property
    def parts(self) -> frozenset[str]:
        return frozenset(tokenize(self.base))

    @property
    def initials(self) -> str:
        pieces = [p for p in re.split(r"[\s–—-]+", self.base) if p]
        return "".join(sorted(p[0].casefold() for p in pieces)) if len(pieces) > 1 else ""


def _proper_words(texts: Iterable[str]) -> frozenset[str]:
    """Capitalised words seen after the start of a sentence (names rather than first words)."""
    found: set[str] = set()
    for text in texts:
        found.update(w.strip("'’") for w in re.findall(r"(?<=\S\s)[A-ZÀ-ÖØ-Þ][\w'’–—-]*", text))
    return frozenset(re.split(r"['’]s$|[–—-]", w)[0] for w in found)


def _clean_proper(name: str, at_start: bool, proper: frozenset[str]) -> str | None:
    words = name.split()
    while words and (
        words[0].casefold() in STOP_WORDS
        or (at_start and re.split(r"[–—-]", words[0])[0] not in proper and not words[0].isupper())
    ):
        words, at_start = words[1:], False
    cleaned = " ".join(words)
    return cleaned if len(cleaned) >= 3 else None


def _clean_lower(words: list[str]) -> str | None:
    for index in range(len(words) - 1, -1, -1):
        if words[index].casefold() in STOP_WORDS:
            words = words[index + 1 :]
            break
    while words and (words[0] in _NOT_A_NAME or words[0].endswith("ly")):
        words = words[1:]
    return " ".join(words) or None


_METHOD_OF = re.compile(
    r"\b(?<![\w-])(?:[Tt]he\s+)(method|technique)\s+of\s+([a-z][\w-]+(?:\s+[a-z][\w-]+)?)"
)
# "the method of choice", "the method of the …": no method's name
_NOT_A_METHOD_OF: Final = word_set(
    "choice the a an this that its their which determination analysis measurement use"
)


def _names_in(sentence: str, proper: frozenset[str]) -> list[_Name]:
    names: list[_Name] = []
    spans: list[tuple[int, int]] = []
    for match in _PROPER_METHOD.finditer(sentence):
        word = _SINGULAR.get(match.group(4), match.group(4))
        base = _clean_proper(match.group(1), match.start(1) == 0, proper)
        if base is None:
            continue
        names.append(_Name(base, word, match.group(2), True, match.group(3) or ""))
        spans.append(match.span())
        if match.group(4) in _SINGULAR:  # "the Ozawa–Flynn–Wall and Friedman methods"
            prefix = sentence[: match.start(1)]
            while (earlier := _COORDINATED.search(prefix)) is not None:
                cleaned = _clean_proper(earlier.group(1), earlier.start(1) == 0, proper)
                if cleaned:
                    names.append(_Name(cleaned, word, None, True))
                prefix = prefix[: earlier.start(1)]
    for match in _METHOD_OF.finditer(sentence):  # "the method of residuals"
        words = match.group(2).split()
        while words and words[-1].casefold() in STOP_WORDS:
            words = words[:-1]
        if words and words[0].casefold() not in _NOT_A_METHOD_OF:
            base = f"{match.group(1).casefold()} of {' '.join(words)}"
            names.append(_Name(base, "", None, True))
            spans.append(match.span())
    for match in _SUCH_AS.finditer(sentence):
        word, at = _SINGULAR.get(match.group(1), match.group(1)), match.end()
        while (item := _LIST_ITEM.match(sentence, at)) is not None:
            own = item.group(2)
            names.append(_Name(item.group(1), _SINGULAR.get(own, own) if own else word, None, True))
            separator = _LIST_SEPARATOR.match(sentence, item.end())
            if separator is None:
                break
            at = separator.end()
    for match in _ACRONYM_METHOD.finditer(sentence):
        words, acronym = match.group(1).split(), match.group(2)
        letters = [c for c in acronym if c.isalpha()]
        tail = words[-len(letters) :]
        if len(words) >= len(letters) and all(
            w[0].casefold() == c.casefold() for w, c in zip(tail, letters, strict=True)
        ):
            words = words[-len(letters) :]
        base = _clean_lower(words)
        if base:
            names.append(_Name(base, _SINGULAR.get(match.group(3), match.group(3)), acronym, False))
            spans.append(match.span())
    for match in _LOWER_METHOD.finditer(sentence):
        if any(a <= match.start() < b or a < match.end() <= b for a, b in spans):
            continue
        previous = re.search(r"(\S+)\s*$", sentence[: match.start()])
        word = previous.group(1) if previous else ""
        if word[:1].isupper() and word.casefold() not in STOP_WORDS:
            continue  # "the Vyazovkin advanced method": the name is the capitalised word
        base = _clean_lower(match.group(1).split())
        if base:
            names.append(_Name(base, _SINGULAR.get(match.group(2), match.group(2)), None, False))
    return names


@dataclass(slots=True)
class _Method:
    names: list[_Name]

    def accepts(self, name: _Name) -> bool:
        for known in self.names:
            if name.parts and name.parts == known.parts:
                return True
            for a, b in ((name, known), (known, name)):
                acronyms = {a.acronym.casefold()} if a.acronym else set()
                if a.base.isupper() and len(a.parts) == 1:
                    acronyms.add(a.base.casefold())
                if any("".join(sorted(x)) == b.initials for x in acronyms if b.initials):
                    return True
            if name.acronym and known.acronym and name.acronym == known.acronym:
                return True
        return False

    @property
    def display(self) -> str:
        bases = [n.base for n in self.names if not (n.base.isupper() and len(n.parts) == 1)]
        base = max(dict.fromkeys(bases), key=bases.count) if bases else self.names[0].base
        acronyms = [n.acronym for n in self.names if n.acronym] + [
            n.base for n in self.names if n.base.isupper() and len(n.parts) == 1
        ]
        words = {n.word for n in self.names}
        word = next((w for w in _PREFERENCE if w in words), sorted(words)[0])
        acronym = next((a for a in acronyms if a != base), None)
        modifiers = [n.modifier for n in self.names if n.base == base]
        modifier = max(dict.fromkeys(modifiers), key=modifiers.count) if modifiers else ""
        name = f"{base} ({acronym})" if acronym else base
        return (f"{name} {modifier} {word}" if modifier else f"{name} {word}").strip()

    def patterns(self) -> tuple[re.Pattern[str], ...]:
        """How the method is named: each spelling as written (any order of a compound name's
        parts, not inside a longer name), and its acronyms."""
        found: dict[str, re.Pattern[str]] = {}
        for name in self.names:
            if name.proper or name.base.isupper():
                found.setdefault(name.base, _method_pattern(name.base, spelled=False))
            else:  # a lower-case name only with a method word: "integral form" is no method
                found.setdefault(name.base, self.form())
            if name.acronym:
                found.setdefault(name.acronym, _method_pattern(name.acronym, spelled=False))
        return tuple(found.values())

    def form(self) -> re.Pattern[str]:
        """The name with its method word ("Kissinger method", "Arrhenius equation")."""
        spellings = sorted({re.escape(n.base) for n in self.names}, key=lambda b: (-len(b), b))
        words = sorted({n.word for n in self.names})
        return re.compile(
            rf"(?i:\b(?:{'|'.join(spellings)})(?:['’]s)?(?:\s+\w+)?\s+(?:{'|'.join(words)}))"
        )


def _where(patterns: tuple[re.Pattern[str], ...], text: str) -> int:
    """Where ``text`` first names a method (-1: nowhere)."""
    hits = [hit.start() for pattern in patterns if (hit := pattern.search(text))]
    return min(hits) if hits else -1


def _first_named(text: str, patterns: list[tuple[re.Pattern[str], ...]]) -> int:
    """The index of the method ``text`` names first (-1: none)."""
    found = [(at, i) for i, p in enumerate(patterns) if (at := _where(p, text)) >= 0]
    return min(found)[1] if found else -1


def _method_groups(passages: Mapping[str, str]) -> list[_Method]:
    # names from the sentences, and from the headings a corpus gives its methods
    # ("## The two-point method")
    all_sentences = [s for text in passages.values() for s in sentences(text)] + [
        h for text in passages.values() if (h := _headings(text))
    ]
    proper = _proper_words(all_sentences)
    methods: list[_Method] = []
    for sentence in all_sentences:
        for name in _names_in(sentence, proper):
            home = next((m for m in methods if m.accepts(name)), None)
            if home is None:
                methods.append(_Method([name]))
            else:
                home.names.append(name)
    return methods


_QUALIFIED_KIND = re.compile(
    r"\b([a-z][\w-]{3,})\s+(?:methods|techniques|approaches|analyses|procedures)\b"
)
_NOT_A_QUALIFIER: Final = frozenset(
    [
        "which",
        "what",
        "other",
        "main",
        "common",
        "different",
        "standard",
        "several",
        "various",
        "these",
        "those",
        "such",
        "available",
        "possible",
        "usual",
        "typical",
        "known",
        "best",
        "most",
    ]
)


def _qualifier(question: Question) -> str | None:
    """The kind of method a question asks for ("which isoconversional methods …")."""
    match = _QUALIFIED_KIND.search(question.text)
    if match is None or match.group(1).casefold() in _NOT_A_QUALIFIER:
        return None
    return match.group(1).casefold()


def _is_of_kind(
    patterns: tuple[re.Pattern[str], ...],
    kind: str,
    passages: Mapping[str, str],
    titles: Mapping[str, str],
) -> bool:
    """Whether the corpus says the method is of ``kind``: a title or heading naming both, or a
    sentence naming the method and, after it, the kind ("KAS … makes it an integral
    isoconversional method"; not "check it with an isoconversional method such as Friedman
    before trusting a Kissinger value")."""
    word = re.compile(rf"\b{re.escape(kind)}\b", re.IGNORECASE)
    for ref, text in passages.items():
        heading = f"{titles.get(ref, '')} {_headings(text)}"
        if _where(patterns, heading) >= 0 and word.search(heading):
            return True
        for sentence in sentences(text):
            at = _where(patterns, sentence)
            hit = word.search(sentence, max(at, 0))
            if at >= 0 and hit is not None:
                return True
    return False


def _select_methods(
    cands: list[_Sentence],
    passages: Mapping[str, str],
    titles: Mapping[str, str] | None = None,
    kind: str | None = None,
    everyone: list[_Sentence] | None = None,
) -> list[Picked]:
    methods = _method_groups(passages)
    patterns = [m.patterns() for m in methods]
    # a method with a section or a document of its own ("## The two-point method") is one the
    # corpus presents, not one it mentions in passing
    headings = [
        f"{(titles or {}).get(ref, '')} {_headings(text)}".strip() for ref, text in passages.items()
    ]
    featured = [any(_where(p, h) >= 0 for h in headings if h) for p in patterns]
    families: set[int] = set()
    # the section a passage opens for a method ("## The two-point method") describes it, though
    # its sentences may repeat none of the question's words: they are candidates for it alone
    eligible = {(c.ref, c.index) for c in cands}
    section_of = {ref: _first_named(_headings(text), patterns) for ref, text in passages.items()}
    if everyone is not None:
        cands = [s for s in everyone if (s.ref, s.index) in eligible or section_of[s.ref] >= 0]
    named = [[_where(p, s.text) for p in patterns] for s in cands]  # sentence x method
    forms = [m.form() for m in methods]
    home = {ref: _first_named(_doc_text(ref, text), patterns) for ref, text in passages.items()}
    ranked: list[tuple[float, int, list[tuple[float, _Sentence]]]] = []
    for i, method in enumerate(methods):
        mentioned = sum(
            1 for ref, text in passages.items() if home[ref] == i or _where(patterns[i], text) >= 0
        )
        options: list[tuple[float, _Sentence]] = []
        for s, where in zip(cands, named, strict=True):
            at, homed = where[i], home[s.ref] == i or section_of[s.ref] == i
            if at < 0 and not homed:
                continue
            if (s.ref, s.index) not in eligible and section_of[s.ref] != i:
                continue
            others = sum(1 for j, other in enumerate(where) if j != i and other >= 0)
            score = (
                s.coverage
                + 0.4 * (at >= 0)
                + 0.3 * homed
                + 0.2 * bool(_DESCRIBES.search(s.text))
                + 0.15 * (0 <= at < 0.4 * len(s.text))
                - 0.15 * min(3, others)
                + 0.3 * s.relevance
                + 0.2 * bool(forms[i].search(s.text))
                - 0.3 * s.fragment
            )
            options.append((score, s))
        if not options:
            continue
        best = max(score for score, _ in options)
        reach = max(s.relevance for _, s in options)
        if any(n.proper or n.acronym for n in method.names):
            label = 0.3
        else:  # a lower-case family label ("isoconversional method") ranks below names
            label = 0.1 * any(len(re.split(r"[\s-]+", n.base)) > 1 for n in method.names)
        family = all(
            set(re.split(r"[\s-]+", n.base.casefold())) <= _FAMILY_WORDS for n in method.names
        )  # "isoconversional method", "integral method": a kind of method, not one
        total = best + 0.3 * reach + 0.05 * min(6, mentioned) + label + 0.5 * featured[i]
        ranked.append((total, i, options))
        if family:
            families.add(i)
    if len(ranked) - len(families) >= 3:  # named methods enough: leave out the family labels
        ranked = [entry for entry in ranked if entry[1] not in families]
    if kind is not None:  # "which isoconversional methods": those the corpus says are
        of_kind = [e for e in ranked if _is_of_kind(patterns[e[1]], kind, passages, titles or {})]
        if len(of_kind) >= 2:
            ranked = of_kind
    ranked.sort(key=lambda entry: (-entry[0], entry[1]))
    picks: list[Picked] = []
    used: set[str] = set()
    for total, i, options in ranked:
        options.sort(key=lambda pair: (-pair[0], pair[1].ref, pair[1].index))
        chosen = next((s for _, s in options if s.text not in used), None)
        if chosen is None:  # its only sentences already describe another method
            continue
        used.add(chosen.text)
        name = methods[i].display
        picks.append(Picked(f"{name}: {chosen.text}", chosen.ref, round(total, 4), name=name))
    return picks


def select(
    question: Question,
    passages: Mapping[str, str],
    *,
    relevance: Mapping[str, float] | None = None,
    limit: int = 5,
    titles: Mapping[str, str] | None = None,
) -> list[Picked]:
    """The sentences that answer ``question`` from ``passages`` (``{"doc_id#location": text}``),
    best first, at most ``limit`` (rules in the module doc); ``[]`` when nothing addresses it.
    ``titles`` (ref → its document's title) lets a methods question reach a method whose
    passage is about the question only through its document ("Arrhenius plots and the
    two-point method")."""
    if limit < 1 or not passages or not addresses(question, passages):
        return []
    cands = _candidates(question, passages, relevance or {})
    picks: list[Picked]
    if question.kind == "value":
        picks = _select_value(question, cands, passages)
    elif question.kind == "methods":
        everyone = _candidates(
            question, passages, relevance or {}, by_passage=True, titles=titles, keep_all=True
        )
        picks = _select_methods(
            [c for c in everyone if c.coverage > 0],
            passages,
            titles,
            _qualifier(question),
            everyone,
        )
    elif question.kind == "explanation":
        picks = _select_explanation(question, cands, passages)
    elif question.kind == "comparison":
        picks = _select_comparison(question, cands)
    elif question.kind == "definition":
        picks = _select_definition(question, cands, passages)
    else:
        picks = []
    return (picks or _select_general(cands))[:limit]
