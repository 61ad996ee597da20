"""rar.science.questions: the kind of a research question, the quantity and method it names, its
terms, what it compares or defines, and whether it asks to compute from data."""

from __future__ import annotations

import pytest

from rar.evidence.analysis import STOP_WORDS
from rar.science.questions import QUANTITIES, Question, classify, lookup, quantity_parts

# question, kind, quantity, method, compute; questions from chemistry, hydrology, astronomy,
# mechanics, biology and materials, phrased the many ways people ask
CASES = [
    # value
    ("What activation energy do the Kissinger data give?", "value", "activation energy",
     "Kissinger", True),
    ("What activation energy does the Ozawa–Flynn–Wall analysis give?", "value",
     "activation energy", "Ozawa–Flynn–Wall", False),
    ("What is the half-life of carbon-14?", "value", "half-life", None, False),
    ("How large is the enthalpy of activation for this rearrangement?", "value",
     "enthalpy of activation", None, False),
    ("Compute the enthalpy and entropy of activation from the Eyring data.", "value",
     "enthalpy and entropy of activation", "Eyring", True),
    ("Calculate Ea from the rate constants in the table.", "value", "activation energy", None,
     True),
    ("Estimate the Young's modulus of the alloy from the stress–strain measurements.", "value",
     "Young's modulus", None, True),
    ("What is the value of Km for this enzyme?", "value", "Km", None, False),
    ("How high is the peak discharge of the river during spring floods?", "value",
     "peak discharge", None, False),
    ("What thermal conductivity do the measurements give?", "value", "thermal conductivity", None,
     True),
    ("Determine the spring constant from the force–extension data.", "value", "spring constant",
     None, True),
    ("How many exoplanets has the Kepler mission confirmed?", "value", "number of exoplanets",
     None, False),
    ("What is the distance to the Andromeda galaxy?", "value", "distance", None, False),
    ("What rate constant does the fit give at 300 K?", "value", "rate constant", None, False),
    ("What is the Vmax of the enzyme?", "value", "Vmax", None, False),
    ("What is the hydraulic conductivity of the sandy aquifer?", "value",
     "hydraulic conductivity", None, False),
    ("What is the orbital period of the planet?", "value", "orbital period", None, False),
    ("What is the activation energy?", "value", "activation energy", None, False),
    ("What value of the Hubble constant does the Cepheid calibration give?", "value",
     "Hubble constant", None, False),
    ("What barrier does the NEB calculation give?", "value", "activation energy", "NEB", False),
    ("What is the boiling point of ethanol at 1 atm?", "value", "boiling point", None, False),
    ("How long does it take for light from the Sun to reach Earth?", "value", "time", None,
     False),
    ("How fast does a glacier flow?", "value", "speed", None, False),
    ("Give the melting temperature of DNA from the curve.", "value", "melting temperature", None,
     True),
    ("What is the pKa of acetic acid?", "value", "pKa", None, False),
    # "yield" names a quantity before strength / stress / point, and is a verb elsewhere
    ("What is the yield strength of aluminium 6061?", "value", "yield strength", None, False),
    ("What activation energy do the data yield?", "value", "activation energy", None, True),
    ("What is the volume of distribution of warfarin?", "value", "volume of distribution", None,
     False),
    # methods
    ("What methods are used to calculate activation energy?", "methods", "activation energy",
     None, False),
    ("Which techniques can measure thermal conductivity of thin films?", "methods",
     "thermal conductivity", None, False),
    ("How can the activation energy be determined experimentally?", "methods",
     "activation energy", None, False),
    ("How is the distance to a star measured?", "methods", "distance", None, False),
    ("What approaches exist for estimating groundwater recharge?", "methods",
     "groundwater recharge", None, False),
    ("Which methods are suitable for measuring Km?", "methods", "Km", None, False),
    ("How do astronomers detect exoplanets?", "methods", None, None, False),
    ("What are the main ways to estimate evapotranspiration?", "methods", "evapotranspiration",
     None, False),
    # explanation
    ("Why does the Arrhenius plot bend at low temperature?", "explanation", None, "Arrhenius",
     False),
    ("How does temperature affect the rate of an enzyme-catalysed reaction?", "explanation",
     None, None, False),
    ("What causes the kinetic compensation effect?", "explanation", None, None, False),
    ("What is the reason for the curvature of Eyring plots?", "explanation", None, "Eyring",
     False),
    ("Why do rivers meander?", "explanation", None, None, False),
    ("How does the water table depend on rainfall?", "explanation", None, None, False),
    ("What explains the redshift of distant galaxies?", "explanation", None, None, False),
    ("Explain why stars twinkle.", "explanation", None, None, False),
    ("What factors control the rate of photosynthesis?", "explanation", None, None, False),
    ("What limits the accuracy of parallax measurements?", "explanation", None, None, False),
    ("What is the relationship between pressure and volume of a gas?", "explanation", None, None,
     False),
    # comparison
    ("Compare the Kissinger and Friedman methods.", "comparison", None, "Kissinger", False),
    ("What is the difference between the enthalpy of activation and the activation energy?",
     "comparison", "enthalpy of activation", None, False),
    ("Arrhenius vs Eyring: which is better for enzyme data?", "comparison", None, None, False),
    ("How does a confined aquifer differ from an unconfined aquifer?", "comparison", None, None,
     False),
    ("Is the Kissinger method or the Ozawa–Flynn–Wall method more reliable?", "comparison", None,
     "Kissinger", False),
    ("Which is more accurate, radar ranging or parallax?", "comparison", None, None, False),
    ("How do white dwarfs and neutron stars differ?", "comparison", None, None, False),
    ("Compare infiltration with runoff.", "comparison", None, None, False),
    ("Compare the thermal conductivity of copper and aluminium.", "comparison",
     "thermal conductivity", None, False),
    ("What are the advantages of the Friedman method over the Kissinger method?", "comparison",
     None, "Friedman", False),
    # definition
    ("What is activation energy?", "definition", "activation energy", None, False),
    ("Define the isokinetic temperature.", "definition", "isokinetic temperature", None, False),
    ("What does isoconversional mean?", "definition", None, None, False),
    ("What is an aquifer?", "definition", None, None, False),
    ("What is meant by the compensation effect?", "definition", None, None, False),
    ("What is a pulsar?", "definition", None, None, False),
    ("What is the Hubble constant?", "definition", "Hubble constant", None, False),
    ("What does the Reynolds number tell us?", "definition", "Reynolds number", None, False),
    ("What is the Kissinger method?", "definition", None, "Kissinger", False),
    ("What are isoconversional methods?", "definition", None, None, False),
    # general
    ("quantum computing in cryptography", "general", None, None, False),
    ("Tell me about the nudged elastic band method", "general", None, "nudged elastic band",
     False),
    ("Sources of error in activation energy measurements", "general", "activation energy", None,
     False),
    ("List the assumptions of the Kissinger method.", "general", None, "Kissinger", False),
]  # fmt: skip


@pytest.mark.parametrize(("text", "kind", "quantity", "method", "compute"), CASES)
def test_classify_finds_kind_quantity_method_and_compute(
    text: str, kind: str, quantity: str | None, method: str | None, compute: bool
) -> None:
    question = classify(text)
    assert (question.kind, question.quantity, question.method, question.compute) == (
        kind,
        quantity,
        method,
        compute,
    )


def test_the_cases_cover_every_kind_with_many_questions() -> None:
    kinds = [case[1] for case in CASES]
    assert len(CASES) >= 40
    assert {kind: kinds.count(kind) >= 4 for kind in set(kinds)} == dict.fromkeys(
        ("value", "methods", "explanation", "comparison", "definition", "general"), True
    )


def test_question_keeps_the_text_as_asked() -> None:
    assert classify("  What is a pulsar?  ").text == "  What is a pulsar?  "


def test_terms_are_analysis_tokens_without_question_words() -> None:
    question = classify("What methods are used to calculate activation energy?")
    assert question.terms == ("activation", "energy")
    terms = classify("What activation energy do the Kissinger data give?").terms
    assert terms == ("activation", "energy", "kissinger")


def test_terms_are_stemmed_like_search_and_free_of_stop_words() -> None:
    terms = classify("Why do distant galaxies show redshifts in their spectra?").terms
    assert terms == ("distant", "galaxy", "show", "redshift", "spectra")
    assert not set(terms) & STOP_WORDS


def test_a_how_adjective_is_part_of_the_question_not_a_term() -> None:
    assert classify("How large is the spring constant?").terms == ("spring", "constant")


def test_comparison_distributes_a_shared_head() -> None:
    assert classify("Compare the Kissinger and Friedman methods.").compared == (
        "Kissinger method",
        "Friedman method",
    )


@pytest.mark.parametrize(
    ("text", "compared"),
    [
        ("What is the difference between the enthalpy of activation and the activation energy?",
         ("enthalpy of activation", "activation energy")),
        ("Arrhenius vs Eyring: which is better for enzyme data?", ("Arrhenius", "Eyring")),
        ("How does a confined aquifer differ from an unconfined aquifer?",
         ("confined aquifer", "unconfined aquifer")),
        ("Is the Kissinger method or the Ozawa–Flynn–Wall method more reliable?",
         ("Kissinger method", "Ozawa–Flynn–Wall method")),
        ("Which is more accurate, radar ranging or parallax?", ("radar ranging", "parallax")),
        ("How do white dwarfs and neutron stars differ?", ("white dwarfs", "neutron stars")),
        ("Compare infiltration with runoff.", ("infiltration", "runoff")),
        ("Compare the thermal conductivity of copper and aluminium.", ("copper", "aluminium")),
        ("What are the advantages of the Friedman method over the Kissinger method?",
         ("Friedman method", "Kissinger method")),
    ],
)  # fmt: skip
def test_comparison_names_the_compared_items(text: str, compared: tuple[str, ...]) -> None:
    assert classify(text).compared == compared


def test_only_a_comparison_has_compared_items() -> None:
    assert classify("What is the Kissinger method?").compared == ()


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("What is an aquifer?", "aquifer"),
        ("Define the isokinetic temperature.", "isokinetic temperature"),
        ("What does isoconversional mean?", "isoconversional"),
        ("What is meant by the compensation effect?", "compensation effect"),
        ("What is the Kissinger method?", "Kissinger method"),
        ("What is the yield strength?", "yield strength"),
        ("What is the 0.2 % offset yield strength?", "0.2 % offset yield strength"),
        ("What is the volume of distribution?", "volume of distribution"),
    ],
)
def test_definition_names_its_subject(text: str, subject: str) -> None:
    assert classify(text).subject == subject


def test_a_known_quantity_is_named_in_plain_words() -> None:
    assert classify("Calculate Ea from the rate constants.").quantity == "activation energy"
    assert classify("What is the apparent activation energy of the reaction?").quantity == (
        "activation energy"
    )


def test_a_quantity_outside_the_table_is_kept_as_written() -> None:
    assert classify("What is the Young's modulus of steel?").quantity == "Young's modulus"
    assert classify("Determine the speed of sound in seawater.").quantity == "speed of sound"


def test_other_kinds_report_a_known_quantity_they_mention() -> None:
    question = classify("Why is the Ea of the catalysed reaction lower?")
    assert (question.kind, question.quantity) == ("explanation", "activation energy")


def test_asking_for_methods_is_not_asking_to_compute() -> None:
    assert not classify("What methods are used to calculate activation energy?").compute
    assert not classify("How can the rate constant be determined?").compute


def test_the_data_phrase_asks_to_compute() -> None:
    assert classify("What half-life do these measurements give?").compute
    assert classify("What is the spring constant from the table?").compute


def test_quantity_parts_split_a_coordinated_quantity() -> None:
    assert quantity_parts("enthalpy and entropy of activation") == (
        "enthalpy of activation",
        "entropy of activation",
    )
    assert quantity_parts("activation energy") == ("activation energy",)


def test_lookup_by_symbol_name_and_head() -> None:
    assert lookup("ΔH‡") is lookup("activation enthalpy") is lookup("enthalpy of activation")
    assert lookup("t½") is not None and lookup("t½") is lookup("half-life")
    assert lookup("Michaelis constant") is lookup("Km")
    assert lookup("apparent activation energy") is lookup("Ea")
    assert lookup("thermal conductivity") is None


def test_every_table_quantity_has_names_and_units() -> None:
    for quantity in QUANTITIES:
        assert quantity.names and quantity.units, quantity.name


def test_classify_is_deterministic_and_returns_frozen_values() -> None:
    text = "Compare the Kissinger and Friedman methods."
    first, second = classify(text), classify(text)
    assert first == second and hash(first) == hash(second)
    with pytest.raises(AttributeError):
        first.kind = "value"  # type: ignore[misc]
    assert isinstance(first, Question)
