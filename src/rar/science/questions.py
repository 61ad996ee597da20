"""What a research question asks: its kind, the quantity and method it names, its content terms.

:func:`classify` reads one question with plain-English rules for scientific questions; nothing
here knows a particular corpus or field. The kinds are tried in this order, first match wins:

1. **explanation**: starts with *why* or *explain*; *how does X affect / influence / depend on /
   change / vary / work*; *what causes / explains / drives / determines / limits X*; *what
   factors / processes control / affect X*; *what is the reason / cause / origin / role / effect
   / mechanism of X*; *what is the relationship between A and B*; *what happens*;
2. **comparison**: *compare A and/with/to B* (*compare the X of A and B*: the quantity X, the
   items A and B); *(the) difference(s) / similarities between A and B*; *the advantages of A over
   B*; *A vs B*, *A versus B*, *A compared with B*; *how does A differ from / compare with B*;
   *how do A and B differ*; a choice (*is / which / should ...*) between *A or B* with a
   comparative (*more, better, faster, -er than, preferable, ...*), or *is A better than B*;
3. **methods**: a method noun (*methods, techniques, approaches, ways, procedures, ...*) right
   after *what / which / list / name* or after *what are the (main, best ...)* with a purpose
   (*used to, for, to, that ...*); *how can / is / do ... X be measured / determined /
   calculated / estimated / ...*, *how to measure X*, *how do <people> measure X*;
4. **value**: *what (is|are) the value / magnitude of X*; *what value ...*; *how large / high /
   much / many / long / fast ...*; *what X do(es) ... give / yield / predict ...*; an imperative
   *compute / calculate / determine / estimate / fit / derive X*; *what is the X of / for / in /
   to Y* when X is a quantity (one of the table, a phrase whose head noun names a measurable such
   as *constant, energy, modulus, conductivity, half-life, distance*, or a symbol such as *pKa,
   pH, H0*), *what is the X?* for a quantity of the table (the definite article asks for its
   value), and *give / state / report the X* for a quantity X;
5. **definition**: *define X*, *what does X mean / stand for / tell us*, *what is meant by X*,
   *what is the meaning /
   definition of X*, and *what is/are X* when X is the whole rest of the question or is followed
   only by *in / for <field>*;
6. **general**: anything else (a bare topic such as ``quantum computing in cryptography``, *what
   are the sources of error in X*); a general question that asks to compute from data is a value
   question.

Fields:

* ``quantity``: the noun phrase after *what* / *value of* / *compute* (or after *to measure* and
  *be determined* in a methods question), cut before a preposition that starts its object (*of*
  stays inside when it continues a quantity: *enthalpy of activation*, *speed of sound*).
  A phrase naming a quantity of the table :data:`QUANTITIES` (by name, symbol or as head:
  *apparent activation energy*) becomes its canonical name (``Ea`` → ``activation energy``);
  any other phrase is kept as written (``Young's modulus``). *How long / fast / far / deep ...
  does X ...* asks for ``time``, ``speed``, ``distance``, ``depth`` .... For the other kinds, the
  first quantity of the table the question names, if any;
* ``method``: a method the question names, as written: a capitalised name or acronym before a
  method word (*Kissinger data*, *the Ozawa–Flynn–Wall analysis*, *NEB calculation*) or a lower-case
  phrase before *method / technique / approach / ...* (*the nudged elastic band method*);
* ``compute``: an imperative compute verb (*compute, calculate, determine, estimate, fit, derive,
  ...*, optionally after *please* / *can you*), or a data phrase: *do the data / measurements /
  readings give*, *from the table / data / measurements*; only for value, explanation and
  general questions;
* ``terms``: the question's analysis tokens (:func:`rar.evidence.analysis.tokenize`, so search and
  composition agree) without the question's frame (*give, data, value, compute, explain, compare,
  ...*; for a methods question also the method nouns), distinct, in order;
* ``compared``: the items of a comparison, determiners dropped; a shared head is distributed
  (*the Kissinger and Friedman methods* → ``Kissinger method``, ``Friedman method``);
* ``subject``: for a definition, the term defined (a quantity-like subject is also the
  ``quantity``: *Define the isokinetic temperature*).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from rar.evidence.analysis import stem, tokenize

Kind = Literal["value", "methods", "explanation", "comparison", "definition", "general"]


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (for the word lists below)."""
    return frozenset(text.split())


__all__ = [
    "QUANTITIES",
    "Kind",
    "Quantity",
    "Question",
    "classify",
    "lookup",
    "quantity_parts",
    "word_set",
    "words_pattern",
]


@dataclass(frozen=True, slots=True)
class Question:
    """One classified question (see the module doc for how each field is found)."""

    text: str
    kind: Kind
    quantity: str | None
    method: str | None
    compute: bool
    terms: tuple[str, ...]
    compared: tuple[str, ...]
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class Quantity:
    """A quantity of the synonym table: names in words, symbols, typical units."""

    name: str
    names: tuple[str, ...]
    """Spellings in words, matched case-insensitively (plurals included)."""
    symbols: tuple[str, ...]
    """Symbols, matched case-sensitively as whole symbols (``k`` is not ``K``)."""
    units: tuple[str, ...]
    """Typical units, as written; a stated value must carry a unit of the same dimension."""


_ENERGY_PER_MOL = ("kJ/mol", "kJ mol⁻¹", "J/mol", "kcal/mol", "eV")
_TIME = ("s", "min", "h", "d", "yr", "years", "days", "hours", "minutes", "seconds")

QUANTITIES: Final = (
    Quantity(
        "activation energy",
        (
            "activation energy",
            "energy of activation",
            "activation barrier",
            "energy barrier",
            "barrier height",
            "barrier",
        ),
        ("Ea", "Eₐ", "E_a", "Eα", "E_α"),
        _ENERGY_PER_MOL,
    ),
    Quantity(
        "enthalpy of activation",
        ("enthalpy of activation", "activation enthalpy"),
        ("ΔH‡", "ΔH≠", "ΔH^‡", "ΔH#"),
        _ENERGY_PER_MOL,
    ),
    Quantity(
        "entropy of activation",
        ("entropy of activation", "activation entropy"),
        ("ΔS‡", "ΔS≠", "ΔS^‡", "ΔS#"),
        ("J/(mol K)", "J mol⁻¹ K⁻¹", "cal/(mol K)", "eV/K"),
    ),
    Quantity(
        "Gibbs energy of activation",
        ("Gibbs energy of activation", "free energy of activation", "activation free energy"),
        ("ΔG‡", "ΔG≠", "ΔG^‡", "ΔG#"),
        _ENERGY_PER_MOL,
    ),
    Quantity("half-life", ("half-life", "half life", "half-lives"), ("t½", "t1/2", "t_1/2"), _TIME),
    Quantity(
        "rate constant",
        ("rate constant", "rate coefficient", "specific rate"),
        ("k",),
        ("s⁻¹", "min⁻¹", "h⁻¹", "M⁻¹ s⁻¹", "L mol⁻¹ s⁻¹", "cm³ s⁻¹"),
    ),
    Quantity(
        "pre-exponential factor",
        ("pre-exponential factor", "preexponential factor", "frequency factor", "prefactor"),
        (),
        ("s⁻¹", "min⁻¹", "M⁻¹ s⁻¹"),
    ),
    Quantity(
        "Km",
        ("Michaelis constant", "Michaelis–Menten constant"),
        ("Km", "KM", "K_m", "Kₘ"),
        ("mM", "µM", "M", "mmol/L"),
    ),
    Quantity(
        "Vmax",
        ("maximum velocity", "maximal velocity", "maximum rate", "limiting rate"),
        ("Vmax", "V_max", "Vₘₐₓ"),
        ("µmol/min", "mM/s", "M s⁻¹", "U/mg", "nmol/min"),
    ),
    Quantity(
        "turnover number",
        ("turnover number", "catalytic constant"),
        ("kcat", "k_cat"),
        ("s⁻¹", "min⁻¹"),
    ),
    Quantity(
        "diffusion coefficient",
        ("diffusion coefficient", "diffusivity"),
        (),
        ("m²/s", "cm²/s", "cm² s⁻¹", "m² s⁻¹"),
    ),
)


# measurable head nouns: a phrase ending in one of these names a quantity (general English)
QUANTITY_HEADS: Final = word_set(
    """
    energy enthalpy entropy constant rate coefficient modulus temperature pressure conductivity
    resistivity resistance viscosity density velocity speed mass weight length distance radius
    diameter width depth height thickness area volume time duration lifetime half-life age
    period frequency wavelength potential voltage current charge capacity capacitance heat flux
    flow discharge recharge runoff yield concentration fraction ratio factor efficiency power
    force strength stress strain magnitude luminosity brightness redshift parallax albedo
    porosity permeability transmissivity storativity diffusivity solubility value number amount
    level intensity gradient slope intercept barrier point size mobility elasticity hardness
    abundance metallicity momentum acceleration gravity torque impedance absorbance emissivity
    reflectance salinity precipitation evaporation evapotranspiration uncertainty error order
    constant rainfall infiltration storage head
    """
)

_OF_COMPLEMENTS: Final = word_set(
    """
    activation formation reaction combustion vaporization vaporisation fusion sublimation
    solution mixing hydration adsorption dissociation ionization ionisation elasticity rigidity
    inertia motion state sound light gravity friction restitution expansion diffusion rotation
    conversion distribution
    """
)

_DETERMINERS: Final = word_set("the a an this that these those its their our his her any each some")
_NP_BOUNDARY: Final = word_set(
    """
    for from in at on by with using given under over between when where if that which who whose
    does do did is are was were be been can could would should will shall may might must has
    have had to as across within during after before than vs vs. versus via per while whereas
    measured determined calculated computed estimated obtained derived found predicted give
    gives yield yields
    """
)
_WH_WORDS: Final = word_set("what which how why when where who whom whose is are do does")
# "yield" is a verb ("what do the data yield") except before these nouns of mechanics, where it
# names a quantity ("the yield strength", "the 0.2 % offset yield stress")
_YIELD_NOUNS: Final = word_set("strength strengths stress stresses point points criterion surface")

# analysis tokens that frame a question rather than say what it is about
_FRAME: Final = word_set(
    """
    give given giving yield data datum value explain explained describe define definition mean
    meaning meant compare compared comparison difference differ vs versus please tell list name
    kind type use used using calculate calculated calculating compute computed determine
    determined determining estimate estimated estimating measure measured measuring obtain
    obtained find derive derived quantify fit get happen affect influence depend cause reason
    exist available possible main best common different various typically usually generally
    someone scientist researcher astronomer chemist physicist engineer hydrologist geologist
    biologist people way similarity corpus document documents text texts passage passages
    table tables source sources literature
    """
)
_FRAME_START: Final = word_set(
    "compare define explain calculate compute determine estimate fit derive find list name "
    "describe tell is are does do should which what how why"
)
_METHOD_NOUNS: Final = word_set(
    "method technique approach procedure strategy means protocol tool way"
)
_HOW_ADJECTIVES: Final = word_set(
    "large high big much many long fast low small far hot cold old deep heavy strong quickly"
)

_GENERIC_ADJECTIVES = (
    "main|best|common|usual|standard|available|different|possible|known|existing|typical|"
    "experimental|computational|most|important|major|principal|current|modern|various"
)
_METHOD_NOUN_RE = (
    r"(?:methods?|techniques?|approach(?:es)?|ways?|procedures?|strategies|strategy|means|"
    r"protocols?|tools?|assays?|experiments?)"
)
_MEASURE_VERB_RE = (
    r"(?:measur|determin|calculat|comput|estimat|obtain|deriv|quantif|extract|evaluat|assess|"
    r"detect|find|found|identif|observ|monitor|map|predict|infer|test|characteri[sz])\w*"
)
_QUANTIFY_VERB = re.compile(
    r"^(?:measur|determin|calculat|comput|estimat|obtain|deriv|quantif|extract|evaluat|assess|"
    r"infer|predict)",
    re.IGNORECASE,
)
_COMPUTE_VERBS = (
    r"(?:compute|calculate|determine|estimate|fit|derive|find|obtain|evaluate|quantify|extract|"
    r"predict|work out)"
)
_ASK = re.IGNORECASE

_EXPLANATION = [
    re.compile(r"^(?:why|explain)\b", _ASK),
    re.compile(
        r"^how (?:does|do|did|would|will|can|could|is|are)\b.*\b(?:affect|influence|depend|"
        r"change|vary|varies|impact|alter|control|relate|increase|decrease|lead|work|happen|"
        r"shape|drive|govern|cause)",
        _ASK,
    ),
    re.compile(
        r"^what (?:causes|caused|explains|drives|determines|controls|governs|leads|is responsible"
        r"|are responsible|underlies|makes|happens|limits|affects|influences)\b",
        _ASK,
    ),
    re.compile(
        r"^(?:what|which) (?:\w+ ){0,2}(?:factors?|processes|mechanisms?|conditions)\b.*\b"
        r"(?:control|affect|determine|influence|govern|drive|limit|cause)",
        _ASK,
    ),
    re.compile(r"^what is the (?:relationship|relation|connection|link) between\b", _ASK),
    re.compile(
        r"^what (?:is|are|was|were) the (?:reasons?|causes?|origins?|roles?|effects?|influence|"
        r"impacts?|mechanisms?|significance|basis|explanation)\b",
        _ASK,
    ),
]
_COMPARATIVE = (
    r"(?:more|less|better|worse|faster|slower|larger|smaller|higher|lower|greater|preferable|"
    r"preferred|prefer|superior|inferior|cheaper|easier|harder|\w+er than)"
)
_COMPARISON = [
    re.compile(r"^compare\b", _ASK),
    re.compile(r"\b(?:advantages?|disadvantages?|benefits?|drawbacks?) of .+ over ", _ASK),
    re.compile(r"\b(?:differences?|distinctions?|similarit(?:y|ies)) between\b", _ASK),
    re.compile(r"\b(?:vs\.?|versus)\s", _ASK),
    re.compile(r"\bcompared? (?:with|to)\b", _ASK),
    re.compile(r"^how (?:does|do|did) .+\b(?:differ|compare)\b", _ASK),
    re.compile(
        rf"^(?:is|are|was|were|which|should|does|do|would|can|could)\b.* or .*{_COMPARATIVE}"
        rf"|^(?:is|are|was|were|which|should|does|do|would|can|could)\b.*{_COMPARATIVE}"
        r".* or ",
        _ASK,
    ),
    re.compile(r"^(?:is|are|was|were|does|do)\b.+\b\w+er than\b|\b(?:more|less) \w+ than\b", _ASK),
]
_METHODS = [
    re.compile(
        rf"^(?:what|which|list|name|describe)\s+(?:(?!(?:is|are|was|were)\b)\w+\s+){{0,2}}?"
        rf"{_METHOD_NOUN_RE}\b",
        _ASK,
    ),
    re.compile(
        rf"^(?:what|which) (?:is|are) (?:the |some )?(?:\w+ ){{0,2}}?{_METHOD_NOUN_RE}"
        r" (?:used|for|to|that|which|of|available|exist|can|could|are|is|do|does)\b",
        _ASK,
    ),
    re.compile(
        rf"^(?:what|which) (?:is|are) (?:the |some )?(?:(?:{_GENERIC_ADJECTIVES}) ){{0,2}}"
        rf"{_METHOD_NOUN_RE}$",
        _ASK,
    ),
    re.compile(
        rf"^how (?:can|could|is|are|was|were|should|would|do|does|might|may)\b.*\b"
        rf"{_MEASURE_VERB_RE}\b",
        _ASK,
    ),
    re.compile(rf"^how to {_MEASURE_VERB_RE}\b", _ASK),
    re.compile(r"^(?:in )?what ways?\b|^by what (?:means|method)\b", _ASK),
]
_VALUE = [
    re.compile(
        r"^(?:what|which) (?:is|are|was|were) (?:the )?(?:values?|magnitudes?|size) of\b", _ASK
    ),
    re.compile(r"^(?:what|which) (?:values?|numbers?|magnitudes?)\b", _ASK),
    re.compile(rf"^how (?:{'|'.join(sorted(_HOW_ADJECTIVES))})\b", _ASK),
    re.compile(
        r"^(?:what|which) [^?]+? (?:do|does|did|would|will|should|could|can)\b.*\b(?:give|"
        r"gives|yield|yields|produce|return|predict|imply|suggest|indicate|show)\b",
        _ASK,
    ),
    re.compile(
        r"^(?:what|which) [^?]+? (?:follows?|results?|is obtained|are obtained|comes? out)\b",
        _ASK,
    ),
    re.compile(rf"^(?:please |can you |could you |now )?{_COMPUTE_VERBS}\b", _ASK),
]
_GIVE = re.compile(r"^(?:please )?(?:give|state|report|quote|tell me) (.+)$", _ASK)
_DEFINITION = [
    re.compile(r"^define\b", _ASK),
    re.compile(
        r"^what (?:does|do) .+ (?:mean|stand for|refer to|tell us|signify|represent)\b", _ASK
    ),
    re.compile(r"^what (?:is|are) meant by\b|^what do (?:we|you) mean by\b", _ASK),
    re.compile(r"^what (?:is|are) the (?:meaning|definition)s? of\b", _ASK),
    re.compile(r"^(?:what|who) (?:is|are)\b", _ASK),
]

_COMPUTE = [
    re.compile(rf"^(?:please |can you |could you |now |use [^,]+ to )?{_COMPUTE_VERBS}\b", _ASK),
    re.compile(
        r"\b(?:do|does|did) (?:the|these|this|those|our|my) (?:\w+[ –-]){0,3}?(?:data|"
        r"measurements?|readings?|observations?|table|values|results|points|experiments?|"
        r"runs|numbers|curves?|graphs?|plots?|spectr(?:um|a)|figures?)\b.*\b(?:give|yield|imply|"
        r"suggest|indicate|produce|predict)\b",
        _ASK,
    ),
    re.compile(
        r"\bfrom (?:the|these|this|those|our|my) (?:\w+[ –-]){0,3}?(?:data|measurements?|"
        r"readings?|observations?|table|values|results|points|experiments?|runs|curves?|"
        r"graphs?|plots?|spectr(?:um|a)|figures?)\b",
        _ASK,
    ),
]

_CAP = "A-ZÀ-ÖØ-ÞΑ-Ω"
_PROPER_WORD = rf"(?:[{_CAP}][\w'’]*)"
PROPER_NAME: Final = rf"{_PROPER_WORD}(?:[–—-]{_PROPER_WORD})*"
_QUESTION_METHOD_WORDS = (
    r"(?:methods?|analys[ie]s|plots?|equations?|approach(?:es)?|techniques?|calculations?|"
    r"constructions?|procedures?|algorithms?|models?|tests?|fits?|data|theory|relations?|"
    r"variants?|spectroscopy|calorimetry|simulations?)"
)
_NAMED_METHOD = re.compile(
    rf"(?<![\w–—-])({PROPER_NAME}(?:\s+{PROPER_NAME})?)(?:['’]s)?(?:\s+\([^)]*\))?"
    rf"\s+{_QUESTION_METHOD_WORDS}\b"
)
_LOWER_METHOD = re.compile(
    r"\b((?:[a-z][\w-]*\s+){1,3}?)(?:method|technique|approach|algorithm|procedure)\b"
)
_NOT_DESCRIPTIVE: Final = word_set(
    """
    same this that such other another new simple simplest simpler standard following above
    previous first related closely whole general common usual modern classic widely used popular
    main basic present particular given proposed original latter former specific different
    various several many most more less accurate better best quick good reliable suitable what
    which whose
    """
)


_LEADING_CLAUSE = re.compile(
    r"^(?:using|with|from|given|for|in|by|assuming|according to)\b[^,?]{1,80},\s+"
    r"(?=(?:what|which|how|why|is|are|does|do|can|could|compute|calculate|determine|estimate)\b)",
    re.IGNORECASE,
)


def _normal(text: str) -> str:
    """The question on one line, without its final mark and without a leading setting clause
    ("Using the two-point method, what …" → "what …"; the clause's words stay in the terms)."""
    text = " ".join(text.split()).strip().rstrip("?.!").strip()
    return _LEADING_CLAUSE.sub("", text)


def _words(text: str) -> list[str]:
    return re.findall(r"[^\s,;:?!()\[\]]+|[,;:?!()]", text)


def _noun_phrase(text: str, *, max_words: int = 7) -> str | None:
    """The noun phrase at the start of ``text``, cut before its object (see the module doc)."""
    words = _words(text)
    while words and words[0].casefold() in _DETERMINERS:
        words = words[1:]
    phrase: list[str] = []
    for index, word in enumerate(words):
        low = word.casefold()
        following = words[index + 1].casefold() if index + 1 < len(words) else ""
        if word in ",;:?!()" or len(phrase) >= max_words:
            break
        if low == "of":
            if following in _OF_COMPLEMENTS or lookup(" ".join([*phrase, word, following])):
                phrase.append(word)
                continue
            break
        if low in ("and", "or", "&"):
            if not following or following in _WH_WORDS or following in _NP_BOUNDARY:
                break
            phrase.append(word)
            continue
        if low == "yield" and following in _YIELD_NOUNS:
            phrase.append(word)
            continue
        if low in _NP_BOUNDARY or (phrase and low in _DETERMINERS):
            break
        phrase.append(word)
    while phrase and phrase[-1].casefold() in ("and", "or", "&", "of"):
        phrase.pop()
    return " ".join(phrase) or None


def _phrase_and_rest(text: str) -> tuple[str | None, str]:
    """The noun phrase at the start of ``text`` and the text after it."""
    phrase = _noun_phrase(text)
    if not phrase:
        return None, text.strip()
    at = text.find(phrase)
    return phrase, text[at + len(phrase) :].strip() if at >= 0 else ""


def lookup(phrase: str) -> Quantity | None:
    """The table quantity a phrase names: by symbol, by name, or as the phrase's head noun."""
    phrase = phrase.strip()
    for quantity in QUANTITIES:
        if phrase in quantity.symbols or phrase == quantity.name:
            return quantity
    tokens = tokenize(phrase)
    if not tokens:
        return None
    for quantity in QUANTITIES:
        for name in (quantity.name, *quantity.names):
            wanted = tokenize(name)
            if wanted and tokens[-len(wanted) :] == wanted and len(tokens) - len(wanted) <= 2:
                return quantity
    return None


def quantity_parts(quantity: str) -> tuple[str, ...]:
    """The single quantities of a phrase: ``enthalpy and entropy of activation`` → two parts."""
    parts = [p.strip() for p in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+|\s*&\s*", quantity)]
    parts = [p for p in parts if p]
    if len(parts) > 1:
        tail = re.search(r"\s(of\s.+)$", parts[-1])
        if tail:
            parts = [p if " of " in p else f"{p} {tail.group(1)}" for p in parts[:-1]] + [parts[-1]]
    return tuple(parts) or (quantity,)


def _canonical(phrase: str | None) -> str | None:
    if not phrase:
        return None
    parts = quantity_parts(phrase)
    if len(parts) == 1:
        found = lookup(phrase)
        return found.name if found else phrase
    return phrase


def _is_quantity_like(phrase: str | None) -> bool:
    if not phrase:
        return False
    if any(lookup(part) for part in quantity_parts(phrase)):
        return True
    words = [w for w in re.split(r"\s+", phrase) if w]
    last = words[-1].casefold() if words else ""
    if " of " in phrase:
        last = phrase.split(" of ")[0].split()[-1].casefold()
    if len(words) == 1 and _SYMBOL_LIKE.fullmatch(words[0]):
        return True  # a symbol: pKa, pH, Tg, H0, Q10
    return last in QUANTITY_HEADS or stem(last) in QUANTITY_HEADS or last.endswith("-life")


_SYMBOL_LIKE = re.compile(
    r"(?=\w*[a-z])(?=\w*[A-Z0-9₀-₉])[A-Za-z][A-Za-z0-9_₀-₉]{1,4}|[A-Z][0-9₀-₉]{1,2}"
)


def _first_known_quantity(text: str) -> str | None:
    best: tuple[int, int, str] | None = None
    for quantity in QUANTITIES:
        for name in quantity.names:
            match = re.search(rf"\b{words_pattern(name)}\b", text, re.IGNORECASE)
            if match:
                key = (match.start(), -len(match.group(0)), quantity.name)
                best = key if best is None or key < best else best
        for symbol in quantity.symbols:
            match = re.search(rf"(?<![\w]){re.escape(symbol)}(?![\w-])", text)
            if match:
                key = (match.start(), -len(symbol), quantity.name)
                best = key if best is None or key < best else best
    return best[2] if best else None


def words_pattern(name: str) -> str:
    """A regex for a name in words: flexible spaces and hyphens, an aside in parentheses between
    words, plural of the last word."""
    words = re.findall(r"[^\W_]+", name)
    if not words:
        return re.escape(name)
    last = words[-1]
    if last.endswith("y") and len(last) > 2:
        tail = re.escape(last[:-1]) + "(?:y|ies)"
    elif last.endswith("fe"):
        tail = re.escape(last[:-2]) + "(?:fe|ves)"
    elif last.endswith("us"):
        tail = re.escape(last) + "(?:es)?"
    else:
        tail = re.escape(last) + "(?:e?s)?"
    # words may be apart by a short aside: "engineering (nominal) stress"
    between = r"(?:[\W_]{1,3}|\s*\([^()]{1,30}\)\s*)"
    return between.join([*(re.escape(w) for w in words[:-1]), tail])


def _method(text: str) -> str | None:
    for match in _NAMED_METHOD.finditer(text):
        name = match.group(1)
        # "the Kissinger and Friedman methods": the first of coordinated names
        before = re.search(
            rf"(?<![\w–—-])({PROPER_NAME}),?\s+(?:and|or)\s+$", text[: match.start(1)]
        )
        if before and before.group(1).casefold() not in _WH_WORDS | _FRAME_START:
            name = before.group(1)
        words = name.split()
        # "the Kissinger DSC data": the acronym names the data's kind, not the method
        if len(words) == 2 and words[1].isupper() and match.group(0).rstrip().endswith("data"):
            words = words[:1]
        # a capitalised question word or sentence-initial word is no name
        while words and (
            words[0].casefold() in _WH_WORDS
            or tokenize(words[0]) == []
            or (match.start(1) == 0 and words[0].casefold() in _FRAME_START)
        ):
            words = words[1:]
        if words:
            return " ".join(words)
    for match in _LOWER_METHOD.finditer(text):
        words = [w for w in match.group(1).split() if w]
        while (
            words
            and (w := words[0].casefold())
            and (w in _NOT_DESCRIPTIVE or w in _DETERMINERS or not tokenize(w) or w in _FRAME)
        ):
            words = words[1:]
        if words:
            return " ".join(words)
    return None


def _split_items(text: str) -> list[str]:
    items = [i for i in re.split(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+", text) if i]
    cleaned = []
    for item in items:
        words = [w for w in item.split() if w]
        while words and words[0].casefold() in _DETERMINERS:
            words = words[1:]
        if words:
            cleaned.append(" ".join(words))
    if len(cleaned) > 1:
        head = cleaned[-1].split()
        if len(head) >= 2 and all(len(i.split()) == 1 for i in cleaned[:-1]):
            noun = stem(head[-1].casefold()) if head[-1].islower() else head[-1]
            cleaned = [f"{i} {noun}" for i in cleaned[:-1]] + [" ".join([*head[:-1], noun])]
    return cleaned


def _cut(text: str) -> str:
    """``text`` up to a clause boundary that ends a compared item."""
    match = re.search(
        rf"\s*(?:[,;:?]|\b(?:for|in terms of|regarding|when|if|with respect to|which|is|are|"
        rf"was|were|does|do|differ|compare|in|at|under|during|to determine|to measure|"
        rf"obtained|measured|derived|computed|calculated|determined|estimated|found|given by)\b|"
        rf"\b{_COMPARATIVE}\b)",
        text,
        re.IGNORECASE,
    )
    return text[: match.start()] if match else text


_COMPARED_QUANTITY = re.compile(r"^compare (?:the )?(.+?) of (.+)$", re.IGNORECASE)


def _compared_quantity(text: str) -> str | None:
    """The quantity in "compare the X of A and B" (None when X names no quantity)."""
    match = _COMPARED_QUANTITY.match(text)
    return _canonical(match.group(1)) if match and _is_quantity_like(match.group(1)) else None


def _compared(text: str) -> tuple[str, ...]:
    quantity = _compared_quantity(text)
    if quantity:  # "compare the thermal conductivity of copper and aluminium"
        match = _COMPARED_QUANTITY.match(text)
        assert match is not None
        text = f"compare {match.group(2)}"
    patterns = [
        (r"\b(?:advantages?|disadvantages?|benefits?|drawbacks?) of (.+?) over (.+)$", True),
        (r"^compare\s+(.+?)\s+(?:with|to|against|versus|vs\.?)\s+(.+)$", True),
        (r"^compare\s+(.+)$", False),
        (
            r"\b(?:differences?|distinctions?|similarit(?:y|ies))(?: and \w+)? between\s+(.+)$",
            False,
        ),
        (
            r"^how (?:does|do|did) (.+?) (?:differ|compare)(?: from| with| to| against)?\s*(.*)$",
            True,
        ),
        (r"^(?:.*?[:,]\s*)?(.+?)\s+(?:vs\.?|versus|compared (?:with|to))\s+(.+)$", True),
    ]
    for pattern, two in patterns:
        match = re.search(pattern, text, re.IGNORECASE)
        if not match:
            continue
        if two:
            left = match.group(1)
            left = re.sub(
                r"^(?:which is (?:\w+ )?\w+,?|is|are|should \w+ \w+)\s+",
                "",
                left,
                flags=re.IGNORECASE,
            )
            right = _cut(match.group(2))
            items = (
                _split_items(left)
                if not right.strip()
                else [*_split_items(_strip_lead(left)), *_split_items(right)]
            )
        else:
            items = _split_items(_cut(match.group(1)))
        if len(items) >= 2:
            return tuple(items)
    # a choice: "... A or B ..."
    match = re.search(
        r"(?:^|[,:]\s*|\b(?:is|are|use|should|choose|between)\s+)([^,:]+?)\s+or\s+"
        r"([^,:?]+)",
        text,
        re.IGNORECASE,
    )
    if match:
        left = _strip_lead(match.group(1))
        items = [*_split_items(left), *_split_items(_cut(match.group(2)))]
        if len(items) >= 2:
            return tuple(items)
    match = re.search(
        rf"^(?:is|are|was|were|does|do)\s+(.+?)\s+{_COMPARATIVE}(?:\s+\w+)?\s+"
        r"than\s+(.+)$",
        text,
        re.IGNORECASE,
    )
    if match:
        return tuple(
            [*_split_items(_strip_lead(match.group(1))), *_split_items(_cut(match.group(2)))]
        )
    return ()


def _strip_lead(text: str) -> str:
    return re.sub(
        r"^(?:(?:which|what|is|are|was|were|should|would|could|can|does|do|i|we|you|"
        r"one|use|choose|the|a|an)\s+)+",
        "",
        text.strip(),
        flags=re.IGNORECASE,
    )


def _kind(text: str) -> Kind:
    if any(p.search(text) for p in _EXPLANATION):
        return "explanation"
    if any(p.search(text) for p in _COMPARISON) and len(_compared(text)) >= 2:
        return "comparison"
    if any(p.search(text) for p in _METHODS):
        return "methods"
    if any(p.search(text) for p in _VALUE):
        return "value"
    given = _GIVE.match(text)
    if given and _is_quantity_like(_noun_phrase(given.group(1))):
        return "value"  # "give the melting temperature of DNA"
    match = re.match(r"^(?:what|which) (?:is|are|was|were) (the )?(.+)$", text, re.IGNORECASE)
    if match:
        phrase, rest = _phrase_and_rest(match.group(2))
        has_object = bool(
            re.match(
                r"^(?:of|for|in|at|on|to|between|from|under|when|during)\b", rest, re.IGNORECASE
            )
        )
        # "what is the activation energy in the Arrhenius equation": what the term means there
        in_theory = re.match(
            r"^(?:in|of)\s+(?:the\s+|an?\s+)?(?:[\w'’–-]+\s+){0,3}"
            r"(?:equation|law|model|theory|expression|formula|relation|rule)s?\W*$",
            rest,
            re.IGNORECASE,
        )
        if in_theory:
            return "definition"
        if has_object and _is_quantity_like(phrase):
            return "value"
        if match.group(1) and phrase and not rest and lookup(phrase):
            return "value"
    if any(p.search(text) for p in _DEFINITION[:4]):
        return "definition"
    if match:
        # "what is X": a definition when X is the whole question, or X "in <field>"
        phrase, rest = _phrase_and_rest(match.group(2))
        if phrase and (not rest or re.match(r"^(?:in|for)\s+\S+(?:\s+\S+){0,2}$", rest)):
            return "definition"
    return "general"


_HOW_NOUNS: Final = {
    "long": "time", "fast": "speed", "quickly": "speed", "far": "distance", "high": "height",
    "deep": "depth", "heavy": "mass", "old": "age", "hot": "temperature", "cold": "temperature",
    "large": "size", "big": "size", "much": "amount", "strong": "strength",
}  # fmt: skip


def _value_quantity(text: str) -> str | None:
    # "how fast does a glacier flow": the adjective's noun, not a phrase after "does"
    how = re.match(r"^how (\w+) (?:does|do|did|can|could|will|would|should) ", text, re.I)
    if how and how.group(1).casefold() in _HOW_NOUNS:
        return _HOW_NOUNS[how.group(1).casefold()]
    patterns = [
        r"^(?:what|which) (?:is|are|was|were) (?:the )?(?:values?|magnitudes?|size) of (.+)$",
        r"^(?:what|which) (?:values?|numbers?|magnitudes?) (?:of|for) (.+)$",
        rf"^(?:please |can you |could you |now |use [^,]+ to )?{_COMPUTE_VERBS} (.+)$",
        r"^(?:please )?(?:give|state|report|quote|tell me) (.+)$",
        r"^how (?:much|many) (.+)$",
        r"^how \w+ (?:is|are|was|were|does|do|did) (.+)$",
        r"^(?:what|which) (?:is|are|was|were) (.+)$",
        r"^(?:what|which) (?!values?\b|numbers?\b)(.+?) (?:do|does|did|would|will|should|could|"
        r"can|is|are|was|were)\b",
    ]
    for pattern in patterns:
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            phrase = _noun_phrase(
                re.sub(r"^(?:the )?values? of ", "", match.group(1), flags=re.IGNORECASE)
            )
            if phrase:
                if pattern.startswith("^how (?:much|many)") and text.lower().startswith("how many"):
                    return f"number of {phrase}"
                return _canonical(phrase)
    return None


def _methods_quantity(text: str) -> str | None:
    patterns = [
        rf"\b(?:to|for|of)\s+({_MEASURE_VERB_RE})\s+(.+)$",
        rf"^how (?:can|could|is|are|was|were|should|would|might|may) (.+?) (?:be )?"
        rf"({_MEASURE_VERB_RE})\b",
        rf"^how (?:do|does|did|to) (?:(?:\w+) )?({_MEASURE_VERB_RE}) (.+)$",
        rf"\b{_METHOD_NOUN_RE}\s+(?:\w+\s+)?({_MEASURE_VERB_RE})\s+(.+)$",
    ]
    for index, pattern in enumerate(patterns):
        match = re.search(pattern, text, re.IGNORECASE)
        if not match:
            continue
        verb, phrase_text = (match.group(2), match.group(1)) if index == 1 else match.groups()
        # "to determine how the activation energy changes": the quantity is what follows "how"
        phrase_text = re.sub(
            r"^(?:how|whether|what|which|why|when|where|if)\s+", "", phrase_text, flags=re.I
        )
        phrase_text = re.sub(
            r"\s+(?:changes?|varies|vary|depends?|increases?|decreases?|evolves?|behaves?)\b.*$",
            "",
            phrase_text,
            flags=re.I,
        )
        phrase = _noun_phrase(phrase_text)
        if phrase and (_QUANTIFY_VERB.match(verb) or _is_quantity_like(phrase)):
            return _canonical(phrase)
    return _first_known_quantity(text)


def _subject(text: str) -> str | None:
    patterns = [
        r"^define (.+)$",
        r"^what (?:does|do) (.+?) (?:mean|stand for|refer to|tell us|signify|represent)\b",
        r"^what (?:is|are) meant by (.+)$",
        r"^what do (?:we|you) mean by (.+)$",
        r"^what (?:is|are) the (?:meaning|definition)s? of (.+)$",
        r"^(?:what|who) (?:is|are) (.+)$",
    ]
    for pattern in patterns:
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            phrase = match.group(1).strip().strip("'\"“”‘’")
            return _noun_phrase(phrase) or phrase
    return None


def _terms(text: str, kind: Kind) -> tuple[str, ...]:
    drop = set(_FRAME)
    if kind == "methods":
        drop |= _METHOD_NOUNS
    how = re.match(r"^how (\w+)", text, re.IGNORECASE)
    if how and how.group(1).casefold() in _HOW_ADJECTIVES:
        drop.add(how.group(1).casefold())
    seen: list[str] = []
    for token in tokenize(text):
        if token not in drop and token not in seen:
            seen.append(token)
    return tuple(seen)


def classify(text: str) -> Question:
    """The kind of ``text`` and what it names (rules in the module doc)."""
    question = _normal(text)
    kind = _kind(question)
    quantity: str | None
    subject: str | None = None
    if kind == "value":
        quantity = _value_quantity(question) or _first_known_quantity(question)
    elif kind == "methods":
        quantity = _methods_quantity(question)
    elif kind == "definition":
        subject = _subject(question)
        found = lookup(subject) if subject else None
        if found:
            quantity = found.name
        elif _is_quantity_like(subject) and subject is not None:
            quantity = subject.removeprefix("the ")
        else:
            quantity = _first_known_quantity(question)
    elif kind == "comparison":
        quantity = _compared_quantity(question) or _first_known_quantity(question)
    else:
        quantity = _first_known_quantity(question)
    compute = kind in ("value", "general", "explanation") and any(
        p.search(question) for p in _COMPUTE
    )
    if compute and kind == "general":
        kind = "value"
        quantity = quantity or _value_quantity(question)
    compared = _compared(question) if kind == "comparison" else ()
    whole = " ".join(text.split()).strip().rstrip("?.!").strip()  # with a leading clause
    return Question(
        text=text,
        kind=kind,
        quantity=quantity,
        method=_method(whole),
        compute=compute,
        terms=_terms(whole, kind),
        compared=compared,
        subject=subject,
    )
