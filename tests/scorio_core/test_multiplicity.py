"""Holm's step-down, against the textbook procedure on p-values."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scorio_core.multiplicity import holm_step_down

ALPHA = 0.05


def textbook_holm(p_values: list[float], alpha: float, shares: int) -> set[int]:
    """Sorted p-values; reject while p_(i) <= alpha / (shares - i + 1)."""
    rejected: set[int] = set()
    for rank, index in enumerate(
        sorted(range(len(p_values)), key=p_values.__getitem__)
    ):
        if p_values[index] > alpha / (shares - rank):
            break
        rejected.add(index)
    return rejected


def p_value_test(
    p_values: list[float], calls: list[int] | None = None
) -> Callable[[int, tuple[int, ...]], list[int]]:
    def rejects(share: int, open_: tuple[int, ...]) -> list[int]:
        if calls is not None:
            calls.append(share)
        return [index for index in open_ if p_values[index] <= ALPHA / share]

    return rejects


@given(
    st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=12),
    st.integers(min_value=0, max_value=5),
)
def test_step_down_rejects_what_the_textbook_holm_rejects(
    p_values: list[float], held: int
) -> None:
    shares = len(p_values) + held
    result = holm_step_down(range(len(p_values)), p_value_test(p_values), shares)
    assert set(result.rejected) == textbook_holm(p_values, ALPHA, max(shares, 1))


def test_each_round_tests_at_the_share_the_rejections_left() -> None:
    calls: list[int] = []
    p_values = [0.010, 0.040, 0.015, 0.300]
    result = holm_step_down(range(4), p_value_test(p_values, calls))
    assert result.rounds == ((0,), (2,))
    assert calls == [4, 3, 2]
    assert result.share == 2


def test_shares_kept_by_untested_hypotheses_lower_the_level() -> None:
    p_values = [0.012]
    assert holm_step_down([0], p_value_test(p_values)).rejected == (0,)
    assert holm_step_down([0], p_value_test(p_values), shares=5).rejected == ()


def test_no_hypotheses_still_asks_once_at_share_one() -> None:
    calls: list[int] = []
    result = holm_step_down([], p_value_test([], calls))
    assert calls == [1]
    assert result.rounds == ()
    assert result.share == 1


def test_everything_rejected_ends_at_share_one() -> None:
    result = holm_step_down(range(3), p_value_test([0.0, 0.0, 0.0]))
    assert result.rejected == (0, 1, 2)
    assert result.share == 1


def test_repeated_hypotheses_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        holm_step_down([1, 1], p_value_test([0.0, 0.0]))


def test_shares_below_the_hypotheses_are_refused() -> None:
    with pytest.raises(ValueError, match="shares must be at least the 2"):
        holm_step_down([0, 1], p_value_test([0.0, 0.0]), shares=1)


def test_a_rejection_that_is_not_open_is_refused() -> None:
    with pytest.raises(ValueError, match="distinct open hypotheses"):
        holm_step_down([0], lambda share, open_: [7])
