r"""Sharing one error rate among many tests: Holm's step-down.

A family of ``m`` hypotheses (here: rank boundaries, each claiming that the
models above it beat those below) shares the error level ``alpha``. Holm's
step-down tests every open hypothesis at ``alpha / L``, ``L`` the number of
hypotheses still sharing the error; each one rejected frees its share, so
the others are tested again at the larger ``alpha / (L - r)``, until a round
rejects none. The family-wise error rate stays at most ``alpha`` whatever the
dependence between the tests (Holm 1979). Rejecting every hypothesis that
passes in a round at once gives the same rejections as Holm's one at a time
in order of evidence, because a hypothesis that passes at a share passes at
every smaller one.

The tests are the caller's: a callable answers which open hypotheses its
test rejects at a given share (for a rank boundary, the stopping rule's
thresholds at ``(1 - confidence) / (2 L)`` per direction, see
:func:`scorio_core.stopping.per_direction_alpha`). Hypotheses that can no
longer be rejected but keep their share (a boundary closed as a tie) are
counted in ``shares`` without being tested.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

Hypothesis = TypeVar("Hypothesis", bound=Hashable)


@dataclass(frozen=True, slots=True)
class StepDown(Generic[Hypothesis]):
    """What a step-down rejected, round by round, and the share it ended at.

    Attributes:
        rounds: The hypotheses each round rejected (the last round, which
            rejected none, is left out).
        share: ``L`` of the last round: the hypotheses still sharing the
            error, at least one.
    """

    rounds: tuple[tuple[Hypothesis, ...], ...]
    share: int

    @property
    def rejected(self) -> tuple[Hypothesis, ...]:
        """Every rejected hypothesis, in the order they were rejected."""
        return tuple(item for round_ in self.rounds for item in round_)


def holm_step_down(
    hypotheses: Iterable[Hypothesis],
    rejects: Callable[[int, tuple[Hypothesis, ...]], Iterable[Hypothesis]],
    shares: int | None = None,
) -> StepDown[Hypothesis]:
    r"""Holm's step-down over hypotheses whose tests depend on the share ``L``.

    Each round calls ``rejects(L, open)`` with ``L = max(1, shares - r)``
    (``r`` rejected so far) and the still open hypotheses in their given
    order; what it returns is rejected and frees its shares. The rounds stop
    at the first that rejects none, so ``rejects`` is called at least once,
    last with the final share.

    Formula:
        Round ``i`` tests each open hypothesis at level
        :math:`\alpha / L_i` with :math:`L_1 = m` and
        :math:`L_{i+1} = L_i - r_i`, :math:`r_i` the rejections of round
        ``i``. For p-values this rejects :math:`H_{(1)}, \dots, H_{(j)}`,
        the longest prefix of the sorted p-values with
        :math:`p_{(i)} \le \alpha / (m - i + 1)`.

    References:
        Holm, S. (1979), "A Simple Sequentially Rejective Multiple Test
        Procedure", Scandinavian Journal of Statistics 6(2), 65-70,
        Section 2.

    Args:
        hypotheses: Distinct hypotheses to test.
        rejects: Which of the open hypotheses the tests reject at share
            ``L`` (a subset of them).
        shares: ``m``, the hypotheses sharing the error at the start: at
            least the number tested (more when some keep a share without
            being tested); ``None``: the number tested.

    Returns:
        The rejections by round and the final share.

    Raises:
        ValueError: for repeated hypotheses, ``shares`` below their number,
            or a rejection that is not open.

    Examples:
        >>> p = {"a": 0.010, "b": 0.040, "c": 0.015, "d": 0.300}
        >>> def rejects(share, open_):
        ...     return [name for name in open_ if p[name] <= 0.05 / share]
        >>> result = holm_step_down(p, rejects)
        >>> result.rounds, result.share
        ((('a',), ('c',)), 2)
        >>> holm_step_down(p, rejects, shares=5).rejected
        ('a',)
    """
    open_ = tuple(hypotheses)
    if len(set(open_)) != len(open_):
        raise ValueError("hypotheses must be distinct")
    remaining = len(open_) if shares is None else int(shares)
    if remaining < len(open_):
        raise ValueError(
            f"shares must be at least the {len(open_)} hypotheses; got {shares!r}"
        )
    rounds: list[tuple[Hypothesis, ...]] = []
    while True:
        share = max(1, remaining)
        rejected = tuple(rejects(share, open_))
        if not rejected:
            return StepDown(rounds=tuple(rounds), share=share)
        chosen = set(rejected)
        if len(chosen) != len(rejected) or not chosen <= set(open_):
            raise ValueError(
                f"rejects must return distinct open hypotheses; got {rejected!r}"
            )
        rounds.append(rejected)
        remaining -= len(rejected)
        open_ = tuple(item for item in open_ if item not in chosen)
