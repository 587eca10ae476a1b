r"""The rubric schemas: the paper's twelve and the library's three, by name.

The twelve categorical schemas of the Bayes@N paper's rubric experiments
(Appendix D.1, Tables 4 and 5), under the names docs/rubrics.md lists, plus
three signal schemas of the authors' library (``scorio.categorical``) under
``scorio_``-prefixed names, each with its rule and default weights.

The paper's rules (Table 4), invalid checked first in every paper schema:
invalid is ``repeated_pattern = 1`` or ``verifier_invalid >= 0.5``; correct is
``is_correct >= 0.5``; high_conf is ``completion_bpt <= tau_high``;
wrong_high_conf is wrong with ``completion_bpt <= tau_low_wrong``; ood is
``prompt_bpt >= tau_prompt``; economical / moderate / verbose split
``token_ratio`` at ``len_p33`` and ``len_p66`` (``<=`` goes to the lower
class); boxed is ``has_box >= 0.5``; A_high is ``verifier_correct >= 0.6``.

Where the paper is silent we decided, and each decision can be changed by the
run (a threshold value, or its ``weights``):

- ``verifier_invalid`` is optional outside the two verifier schemas: when an
  event has no verifier, invalid is ``repeated_pattern = 1`` alone.
- The cuts ``0.5`` (invalid C) and ``0.6`` (A_high) are thresholds
  ``invalid_c`` and ``a_high`` with the paper's values as defaults.
- Conf-Calibrated: a correct attempt is high_conf when ``completion_bpt <=
  corr_p33``, mid when ``<= corr_p66``, low_conf above (Table 4 lists
  corr_p33/corr_p66 for this); a wrong attempt that is not wrong_high_conf is
  category 1 ("wrong and low_conf"), so every attempt has a category.
- Conf-Wrong Penalty: likewise, every wrong attempt that is not
  wrong_high_conf is category 2.
- Verifier-Only: after invalid, A_high gives 3; otherwise "high B" (2) when
  ``verifier_wrong >= verifier_invalid`` and "high C" (1) else: "high" is the
  larger of the two, so no attempt is left without a category.
- Default weights (the paper gives only Format Aware's ``[0, 0, 1, 2, 3]``):
  invalid scores 0; see :data:`RUBRICS` for each schema's intent.
- Percentiles are taken over every attempt of the log (all models pooled),
  invalid ones included; ``tau_low_wrong`` over wrong attempts and
  ``corr_p33``/``corr_p66`` over correct ones (by ``is_correct``), with
  numpy's linear interpolation.

References:
    Hariri, Samandar, Hinczewski, Chaudhary. Don't Pass@k: A Bayesian
    Framework for Large Language Model Evaluation. ICLR 2026,
    arXiv:2510.04265, Appendix D.1 (Tables 4 and 5), Algorithm 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final

from monitor.rubrics.reading import Reading
from monitor.rubrics.rubric import Rubric


def _paper(
    name: str,
    title: str,
    needs: str,
    categories: str,
    intent: str,
    rule: Callable[[Reading], int],
) -> Rubric:
    """A paper schema from a Table 5 row: invalid is category 0, checked first.

    ``needs`` is ``"signals | thresholds"`` beyond ``repeated_pattern`` and
    ``is_correct``; ``categories`` lists ``label:weight`` for categories 1..C.
    """
    signals, _, thresholds = needs.partition("|")
    pairs = [("invalid", "0"), *(item.split(":") for item in categories.split())]
    verifier = "verifier_invalid" in signals.split()
    return Rubric(
        name,
        title,
        ("repeated_pattern", *signals.split()),
        (*thresholds.split(), "invalid_c"),
        tuple(label for label, _ in pairs),
        tuple(float(weight) for _, weight in pairs),
        f"paper, Appendix D.1 Table 5; default weights ours: {intent}",
        lambda reading: 0 if reading.invalid else rule(reading),
        () if verifier else ("verifier_invalid",),
    )


def _library(
    name: str,
    title: str,
    needs: str,
    categories: str,
    rule: Callable[[Reading], int],
) -> Rubric:
    """A ``scorio.categorical`` schema: categories by increasing weight."""
    signals, _, thresholds = needs.partition("|")
    pairs = [item.split(":") for item in categories.split()]
    return Rubric(
        name,
        title,
        tuple(signals.split()),
        tuple(thresholds.split()),
        tuple(label for label, _ in pairs),
        tuple(float(weight) for _, weight in pairs),
        f"scorio 0.2.3 scorio.categorical schema {title!r}, its weights",
        rule,
    )


def _grid(correct: bool, level: bool, *, worst_wrong: bool) -> int:
    """A 2 x 2 library schema: wrong 0-1, correct 2-3, ``level`` on top.

    With ``worst_wrong`` a wrong answer *with* the level is the worst case.
    """
    if correct:
        return 2 + level
    return int(level != worst_wrong)


def _two_by_two(first: bool, second: bool) -> int:
    """Categories 1..4 of a paper 2 x 2 row order (wrong before correct)."""
    return 1 + 2 * first + second


RUBRICS: Final[Mapping[str, Rubric]] = MappingProxyType(
    {
        rubric.name: rubric
        for rubric in (
            _paper(
                "exact_match",
                "Exact Match",
                "is_correct |",
                "wrong:0 correct:1",
                "correct scores 1",
                lambda r: 1 + r.correct,
            ),
            _paper(
                "format_aware",
                "Format Aware",
                "is_correct has_box |",
                "wrong_unboxed:0 wrong_boxed:1 correct_unboxed:2 correct_boxed:3",
                "the paper's example [0, 0, 1, 2, 3]",
                lambda r: _two_by_two(r.correct, r.boxed),
            ),
            _paper(
                "conf_calibrated",
                "Conf-Calibrated",
                "is_correct completion_bpt | tau_low_wrong corr_p33 corr_p66",
                "wrong_low_conf:1 wrong_high_conf:0 correct_low_conf:2 "
                "correct_mid:3 correct_high_conf:4",
                "confident errors score least, confident correct answers most",
                lambda r: (
                    (3 + r.correct_confidence) if r.correct else 1 + r.wrong_high_conf
                ),
            ),
            _paper(
                "ood_robustness",
                "OOD Robustness",
                "is_correct prompt_bpt | tau_prompt",
                "ood_wrong:0 ind_wrong:0 ood_correct:2 ind_correct:1",
                "a correct answer to an unfamiliar (ood) prompt counts double",
                lambda r: _two_by_two(r.correct, not r.ood),
            ),
            _paper(
                "strict_compliance",
                "Strict Compliance",
                "is_correct has_box |",
                "not_compliant:0 correct_boxed:1",
                "only a correct boxed answer scores",
                lambda r: 1 + (r.correct and r.boxed),
            ),
            _paper(
                "conf_wrong_penalty",
                "Conf-Wrong Penalty",
                "is_correct completion_bpt | tau_low_wrong",
                "wrong_high_conf:-1 wrong_low_conf:0 correct:1",
                "a confident error is penalised below an invalid answer",
                lambda r: 3 if r.correct else 1 + (not r.wrong_high_conf),
            ),
            _paper(
                "verifier_only",
                "Verifier-Only",
                "verifier_correct verifier_wrong verifier_invalid | a_high",
                "high_c:0 high_b:0 a_high:1",
                "the verifier's acceptance alone scores",
                lambda r: (
                    3
                    if r.a_high
                    else 2
                    if r.number("verifier_wrong") >= r.number("verifier_invalid")
                    else 1
                ),
            ),
            _paper(
                "format_confidence",
                "Format+Confidence",
                "is_correct has_box completion_bpt | tau_high",
                "wrong_unboxed:0 wrong_boxed_low_conf:1 wrong_boxed_high_conf:0 "
                "correct_unboxed_low_conf:2 correct_unboxed_high_conf:3 "
                "correct_boxed_low_conf:4 correct_boxed_high_conf:5",
                "format first, then confidence; a confident boxed error scores 0",
                lambda r: (
                    (4 + 2 * r.boxed + r.high_conf)
                    if r.correct
                    else (2 + r.high_conf if r.boxed else 1)
                ),
            ),
            _paper(
                "length_robust",
                "Length-Robust",
                "is_correct |",
                "wrong:0 correct:1",
                "as Exact Match: length is not penalised",
                lambda r: 1 + r.correct,
            ),
            _paper(
                "verifier_probe",
                "Verifier Probe",
                "is_correct verifier_correct verifier_wrong verifier_invalid | a_high",
                "wrong_a_high:0 wrong_not_a_high:0 correct_not_a_high:1 "
                "correct_a_high:2",
                "correct answers the verifier also accepts score most",
                lambda r: (4 if r.a_high else 3) if r.correct else 2 - r.a_high,
            ),
            _paper(
                "efficiency_adjusted",
                "Efficiency-Adjusted",
                "is_correct token_ratio | len_p33 len_p66",
                "wrong_economical:0 wrong_moderate:0 wrong_verbose:0 "
                "correct_economical:3 correct_moderate:2 correct_verbose:1",
                "shorter correct answers score more",
                lambda r: 1 + 3 * r.correct + r.length_class,
            ),
            _paper(
                "concise_high_conf",
                "Concise High-Conf",
                "is_correct token_ratio completion_bpt | len_p33 len_p66 tau_high",
                "wrong:0 correct_verbose:1 correct_moderate:2 correct_economical:3 "
                "correct_economical_high_conf:4",
                "correct, shorter and confident scores most",
                lambda r: (
                    (5 if r.length_class == 0 and r.high_conf else 4 - r.length_class)
                    if r.correct
                    else 1
                ),
            ),
            _library(
                "scorio_format_aware",
                "Format Compliance & Correctness",
                "is_correct has_box |",
                "wrong_unboxed:0 wrong_boxed:0.3 correct_unboxed:0.6 correct_boxed:1",
                lambda r: _grid(r.correct, r.boxed, worst_wrong=False),
            ),
            _library(
                "scorio_conf_calibrated",
                "Confident & Correct",
                "is_correct bits_per_token | confidence",
                "confident_wrong:0.1 unconfident_wrong:0.2 unconfident_correct:0.6 "
                "confident_correct:1",
                lambda r: _grid(r.correct, r.confident, worst_wrong=True),
            ),
            _library(
                "scorio_ood_robustness",
                "Difficulty-Adjusted Correctness",
                "is_correct prompt_bits_per_token | prompt_surprise",
                "familiar_wrong:0.1 unfamiliar_wrong:0.4 familiar_correct:0.7 "
                "unfamiliar_correct:1",
                lambda r: _grid(r.correct, r.unfamiliar, worst_wrong=False),
            ),
        )
    }
)
