"""CountTable: streaming updates, corrections and merges against batch oracles."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import scorio.eval as oracle
from hypothesis import given, settings
from hypothesis import strategies as st

import scorio_core.storage as count_tables
from scorio_core import CountTable, posterior_from_counts
from scorio_core.question_index import QuestionIndex
from tests.scorio_core.strategies import FloatVector, IntMatrix, categorical_bank

TOLERANCE = 1e-12
Event = tuple[int, int, int, bool]  # question, category, delta, prior


def exact_posterior(table: CountTable) -> tuple[float, float]:
    """Dirichlet moments per question in exact rational arithmetic."""
    weights = [Fraction(float(w)) for w in table.weights]
    observed, prior = table.observed_counts, table.prior_counts
    rows = [
        [int(n) + int(n0) + 1 for n, n0 in zip(o_row, p_row, strict=True)]
        for o_row, p_row in zip(observed, prior, strict=True)
    ]
    rows += [[1] * len(weights)] * (table.question_count - len(rows))
    mean_sum, variance_sum = Fraction(0), Fraction(0)
    for nu in rows:
        total = sum(nu)
        mean = sum(
            (Fraction(n, total) * w for n, w in zip(nu, weights, strict=True)),
            Fraction(0),
        )
        second = sum(
            (Fraction(n, total) * w * w for n, w in zip(nu, weights, strict=True)),
            Fraction(0),
        )
        mean_sum += mean
        variance_sum += (second - mean * mean) / (total + 1)
    size = table.question_count
    return float(mean_sum / size), math.sqrt(variance_sum) / size


def batch_posterior(table: CountTable) -> tuple[float, float]:
    nu = table.observed_counts + table.prior_counts + 1
    unseen = table.question_count - nu.shape[0]
    nu = np.vstack([nu, np.ones((unseen, table.category_count), dtype=np.int64)])
    posterior = posterior_from_counts(nu, table.weights)
    return posterior.mu, posterior.sigma


@st.composite
def event_streams(draw: st.DrawFn) -> tuple[FloatVector, int, list[Event]]:
    """Random weights and a stream of adds, retractions and prior outcomes."""
    categories = draw(st.integers(2, 4))
    weights = np.array(
        draw(st.lists(st.floats(-3, 3), min_size=categories, max_size=categories))
    )
    questions = draw(st.integers(1, 6))
    live: list[tuple[int, int, bool]] = []
    events: list[Event] = []
    for _ in range(draw(st.integers(1, 60))):
        if live and draw(st.integers(0, 3)) == 0:
            question, category, prior = live.pop(draw(st.integers(0, len(live) - 1)))
            events.append((question, category, -1, prior))
        else:
            trial = (
                draw(st.integers(0, questions - 1)),
                draw(st.integers(0, categories - 1)),
                draw(st.booleans()),
            )
            live.append(trial)
            events.append((trial[0], trial[1], 1, trial[2]))
    return weights, questions, events


@given(categorical_bank())
def test_a_table_whose_questions_all_have_n_trials_equals_bayes(
    bank: tuple[IntMatrix, FloatVector, IntMatrix | None],
) -> None:
    results, weights, prior = bank
    table = CountTable.from_matrix(results, weights, prior)
    assert (table.mu, table.sigma) == pytest.approx(
        oracle.bayes(results, weights, prior), abs=TOLERANCE
    )


@given(event_streams())
def test_ragged_counts_equal_exact_dirichlet_moments(
    stream: tuple[FloatVector, int, list[Event]],
) -> None:
    weights, questions, events = stream
    table = CountTable(weights, question_count=questions)
    for question, category, delta, prior in events:
        table.update(question, category, delta, prior=prior)
    assert (table.mu, table.sigma) == pytest.approx(
        exact_posterior(table), abs=TOLERANCE
    )


@given(event_streams())
def test_every_prefix_of_a_stream_equals_a_batch_recompute(
    stream: tuple[FloatVector, int, list[Event]],
) -> None:
    weights, questions, events = stream
    table = CountTable(weights, question_count=questions + 2)
    for question, category, delta, prior in events:
        table.update(question, category, delta, prior=prior)
        assert (table.mu, table.sigma) == pytest.approx(
            batch_posterior(table), abs=TOLERANCE
        )
        assert table.sigma >= 0.0


@pytest.mark.slow
def test_a_million_random_updates_do_not_drift() -> None:
    rng = np.random.default_rng(2026)
    weights = np.array([-0.7, 0.1, 0.55, 3.0])
    table = CountTable(weights, question_count=50)
    live: list[tuple[int, int]] = []
    questions = rng.integers(0, 50, size=1_000_000)
    categories = rng.integers(0, 4, size=1_000_000)
    retract = rng.random(1_000_000) < 0.3
    for step in range(1_000_000):
        if retract[step] and live:
            question, category = live.pop()
            table.update(question, category, -1)
            # a correction: the retracted trial comes back in another category
            table.update(question, (category + 1) % 4)
            live.append((question, (category + 1) % 4))
        else:
            question, category = int(questions[step]), int(categories[step])
            table.update(question, category)
            live.append((question, category))
    assert (table.mu, table.sigma) == pytest.approx(
        batch_posterior(table), abs=TOLERANCE
    )


def test_a_correction_moves_one_count_exactly() -> None:
    table = CountTable([0.0, 0.5, 1.0], question_count=3)
    for category in (0, 1, 2, 2):
        table.update("q1", category)
    table.update("q1", 0, -1)
    table.update("q1", 2)
    direct = CountTable([0.0, 0.5, 1.0], question_count=3)
    for category in (1, 2, 2, 2):
        direct.update("q1", category)
    assert table.counts("q1") == (0, 1, 3)
    assert (table.mu, table.sigma) == (direct.mu, direct.sigma)


@given(event_streams(), st.data())
def test_merging_two_halves_equals_the_whole_in_either_order(
    stream: tuple[FloatVector, int, list[Event]], data: st.DataObject
) -> None:
    weights, questions, events = stream
    events = [event for event in events if event[2] > 0]
    cut = data.draw(st.integers(0, len(events)))
    whole, first, second = (CountTable(weights, questions) for _ in range(3))
    for index, (question, category, delta, prior) in enumerate(events):
        whole.update(question, category, delta, prior=prior)
        (first if index < cut else second).update(
            question, category, delta, prior=prior
        )
    left, right = first.copy(), second.copy()
    left.merge(second)
    right.merge(first)
    for merged in (left, right):
        assert (merged.mu, merged.sigma) == pytest.approx(
            (whole.mu, whole.sigma), abs=TOLERANCE
        )
        assert merged.trial_count == whole.trial_count
        assert merged.prior_trial_count == whole.prior_trial_count


@given(event_streams(), st.data())
def test_merge_is_associative_with_an_empty_identity(
    stream: tuple[FloatVector, int, list[Event]], data: st.DataObject
) -> None:
    weights, questions, events = stream
    parts = [CountTable(weights, questions) for _ in range(3)]
    for question, category, delta, prior in events:
        if delta > 0:
            parts[data.draw(st.integers(0, 2))].update(question, category, prior=prior)
    a_b_c = parts[0].copy()
    a_b_c.merge(parts[1])
    a_b_c.merge(parts[2])
    b_c = parts[1].copy()
    b_c.merge(parts[2])
    a_bc = parts[0].copy()
    a_bc.merge(b_c)
    with_empty = a_bc.copy()
    with_empty.merge(CountTable(weights, questions))
    for table in (a_bc, with_empty):
        assert (table.mu, table.sigma) == pytest.approx(
            (a_b_c.mu, a_b_c.sigma), abs=TOLERANCE
        )


def test_declared_questions_not_seen_yet_contribute_their_prior() -> None:
    table = CountTable([0.0, 1.0], question_count=4)
    table.update("a", 1)
    results = np.array([[1, 0], [0, 0], [0, 0], [0, 0]])
    # Rows 2-4 have no trials: their nu is the uniform prior, as if R0 = [].
    nu = np.array([[1, 2], [1, 1], [1, 1], [1, 1]])
    expected = posterior_from_counts(nu, [0.0, 1.0])
    assert (table.mu, table.sigma) == pytest.approx((expected.mu, expected.sigma))
    assert table.question_count == 4 and not table.is_open
    assert results.shape[0] == table.question_count


def test_an_open_table_uses_the_questions_seen_as_m() -> None:
    table = CountTable([0.0, 1.0])
    table.update("a", 1)
    table.update("b", 0)
    assert table.is_open and table.question_count == 2
    assert (table.mu, table.sigma) == pytest.approx(oracle.bayes(np.array([[1], [0]])))


def test_from_state_rebuilds_the_same_posterior() -> None:
    results = np.array([[0, 1, 2], [2, 2, 1]])
    table = CountTable.from_matrix(results, [0.0, 0.5, 1.0], [[1], [0]])
    rebuilt = CountTable.from_state(
        table.weights, table.questions, table.observed_counts, table.prior_counts, 2
    )
    assert (rebuilt.mu, rebuilt.sigma) == (table.mu, table.sigma)


def test_update_many_equals_one_update_at_a_time() -> None:
    rng = np.random.default_rng(3)
    questions = [f"q{i}" for i in rng.integers(0, 20, size=500)]
    categories = rng.integers(0, 3, size=500)
    one, many = CountTable([0.0, 0.2, 1.0], 25), CountTable([0.0, 0.2, 1.0], 25)
    for question, category in zip(questions, categories, strict=True):
        one.update(question, int(category))
    many.update_many(questions, categories)
    assert (many.mu, many.sigma) == pytest.approx((one.mu, one.sigma), abs=TOLERANCE)
    assert many.trial_count == 500


@settings(max_examples=200, deadline=None)
@given(
    weights=st.sampled_from([[0.0, 1.0], [0.0, 0.2, 1.0], [-1.0, 0.5, 0.25, 2.0]]),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_batch_and_trial_paths_agree_to_the_last_bit(
    weights: list[float], seed: int
) -> None:
    """Statuses must not depend on how trials were grouped into calls."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 300))
    questions = [f"q{i}" for i in rng.integers(0, 40, size=size)]
    categories = rng.integers(0, len(weights), size=size)
    one, many = CountTable(weights, 40), CountTable(weights, 40)
    for question, category in zip(questions, categories, strict=True):
        one.update(question, int(category))
    split = int(rng.integers(0, size + 1))
    many.update_many(questions[:split], categories[:split])
    for question, category in zip(questions[split:], categories[split:], strict=True):
        many.update(question, int(category))
    rebuilt = CountTable.from_state(
        weights, one.questions, one.observed_counts, question_count=40
    )
    for table in (one, many, rebuilt):
        table.resync()
    assert (many.mu, many.sigma) == (one.mu, one.sigma) == (rebuilt.mu, rebuilt.sigma)


def test_avg_matches_scorio_on_rectangular_data() -> None:
    results = np.array([[0, 1, 2, 2, 1], [1, 1, 0, 2, 2]])
    table = CountTable.from_matrix(results, [0.0, 0.5, 1.0])
    assert table.avg == pytest.approx(oracle.avg(results, np.array([0.0, 0.5, 1.0])))


def test_avg_with_uneven_counts_averages_each_questions_observed_mean() -> None:
    table = CountTable([0.0, 1.0], question_count=3)
    for question, category in [("a", 1), ("a", 1), ("a", 0), ("b", 1)]:
        table.update(question, category)
    average, sigma = table.avg
    assert average == pytest.approx((2 / 3 + 1) / 2)
    assert sigma > 0.0


@pytest.mark.parametrize(
    ("question", "category", "delta", "message"),
    [
        ("a", 2, 1, "category must be an integer in 0..1; got 2"),
        ("a", -1, 1, "category must be an integer in 0..1; got -1"),
        ("a", 1.0, 1, "category must be an integer in 0..1; got 1.0"),
        ("a", True, 1, "category must be an integer"),
        ("a", 1, 1.5, "delta must be an integer"),
        ("a", 0, -1, "count of category 0 on question 'a' would become negative"),
        ("new", 1, -1, "cannot retract a trial of unseen question 'new'"),
        ("c", 1, 1, "question 'c' would exceed question_count=2"),
    ],
)
def test_bad_updates_raise_and_leave_the_table_unchanged(
    question: str, category: object, delta: object, message: str
) -> None:
    table = CountTable([0.0, 1.0], question_count=2)
    table.update("a", 1)
    table.update("b", 0)
    before = (table.mu, table.sigma, table.trial_count, table.observed_counts.tolist())
    with pytest.raises(ValueError, match=message):
        table.update(question, category, delta)  # type: ignore[arg-type]
    assert (
        table.mu,
        table.sigma,
        table.trial_count,
        table.observed_counts.tolist(),
    ) == before


def test_merging_tables_with_different_weights_is_refused() -> None:
    with pytest.raises(ValueError, match="different weights"):
        CountTable([0.0, 1.0]).merge(CountTable([0.0, 2.0]))


def test_interval_is_clipped_to_the_score_range() -> None:
    table = CountTable([0.0, 1.0], question_count=1)
    for _ in range(3):
        table.update("q", 1)
    low, high = table.interval(0.95, table.score_range)
    assert 0.0 <= low <= table.mu <= high == 1.0


def _shared_tables(
    weights: list[float], models: int, rows: int, rng: np.random.Generator
) -> list[CountTable]:
    """Tables of one run (a shared question index) with some counts already."""
    index = QuestionIndex([f"q{row}" for row in range(rows)])
    tables = [CountTable(weights, rows, index=index) for _ in range(models)]
    for table in tables:
        for _ in range(int(rng.integers(0, 3 * rows))):
            table.update(
                f"q{int(rng.integers(0, rows))}",
                int(rng.integers(0, len(weights))),
                prior=bool(rng.integers(0, 2)),
            )
    return tables


def _state(table: CountTable) -> tuple[object, ...]:
    return (
        table.observed_counts.tolist(),
        table.prior_counts.tolist(),
        table.question_trials.tolist(),
        table.trial_count,
        table.prior_trial_count,
    )


def _assert_alike(together: CountTable, one: CountTable) -> None:
    """Same counts, and the posterior within rounding."""
    assert _state(together) == _state(one)
    assert (together.mu, together.sigma) == pytest.approx(
        (one.mu, one.sigma), abs=TOLERANCE
    )


@settings(max_examples=150, deadline=None)
@given(
    weights=st.sampled_from([[0.0, 1.0], [0.0, 0.2, 1.0], [-1.0, 0.5, 0.25, 2.0]]),
    prior=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    piece_rows=st.sampled_from([1, 4, 16_384]),
)
def test_adding_rows_of_many_tables_together_equals_one_table_at_a_time(
    weights: list[float], prior: bool, seed: int, piece_rows: int
) -> None:
    rng = np.random.default_rng(seed)
    models, rows = int(rng.integers(1, 6)), int(rng.integers(1, 12))
    tables = _shared_tables(weights, models, rows, np.random.default_rng(seed))
    alone = _shared_tables(weights, models, rows, np.random.default_rng(seed))
    parts = []
    for table in tables:
        chosen = np.sort(
            rng.choice(rows, size=int(rng.integers(0, rows + 1)), replace=False)
        )
        # Large additions widen the count types; retractions stay within
        # what each row holds.
        held = (table.prior_counts if prior else table.observed_counts)[chosen]
        deltas = rng.integers(0, 300 if rng.random() < 0.2 else 3, size=held.shape)
        deltas -= rng.integers(0, held + 1)
        parts.append((table, chosen.astype(np.int64), deltas.astype(np.int64)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(count_tables, "_TOGETHER_ROWS", piece_rows)
        CountTable.add_row_counts_together(parts, prior=prior)
    for table, (_, chosen, deltas) in zip(alone, parts, strict=True):
        table.add_row_counts(chosen, deltas, prior=prior)
    for together, one in zip(tables, alone, strict=True):
        _assert_alike(together, one)
        together.resync()
        one.resync()
        assert (together.mu, together.sigma) == (one.mu, one.sigma)


@pytest.mark.parametrize("piece_rows", [1, 16_384])
def test_a_negative_count_in_any_table_changes_none(
    piece_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(count_tables, "_TOGETHER_ROWS", piece_rows)
    rng = np.random.default_rng(5)
    tables = _shared_tables([0.0, 1.0], 3, 4, rng)
    before = [(_state(table), table.mu, table.sigma) for table in tables]
    held = tables[2].observed_counts
    retract = np.zeros((1, 2), dtype=np.int64)
    retract[0, 0] = -(int(held[1, 0]) + 1)
    parts = [
        (tables[0], np.array([0, 1]), np.ones((2, 2), dtype=np.int64)),
        (tables[1], np.array([3]), np.ones((1, 2), dtype=np.int64)),
        (tables[2], np.array([1]), retract),
    ]
    with pytest.raises(ValueError, match="question 'q1' would become negative"):
        CountTable.add_row_counts_together(parts, prior=False)
    assert [(_state(table), table.mu, table.sigma) for table in tables] == before


def test_a_batch_counts_as_one_plus_k_squared_over_m_updates() -> None:
    assert count_tables._batch_updates(1, 1) == 2
    assert count_tables._batch_updates(50, 1000) == 3
    assert count_tables._batch_updates(31, 1000) == 1
    assert count_tables._batch_updates(1000, 1000) == 1001


def test_long_streams_of_batches_resync_on_their_count_and_do_not_drift() -> None:
    # 3 tables of 200 rows, batches of 20 rows each: 1 + 400 // 200 = 3
    # updates a batch, so the first resync (window 1,024) is at batch 342.
    rng = np.random.default_rng(18)
    weights = [-1.0, 0.5, 0.25, 2.0]
    rows = 200
    index = QuestionIndex([f"q{row}" for row in range(rows)])
    tables = [CountTable(weights, rows, index=index) for _ in range(3)]
    for table in tables:
        table.add_row_counts(
            np.arange(rows), rng.integers(0, 3, size=(rows, 4)), prior=False
        )
        table.resync()
    synced_at: list[int] = []
    for batch in range(1, 1_201):
        parts = []
        for table in tables:
            chosen = np.sort(rng.choice(rows, size=20, replace=False))
            held = table.observed_counts[chosen]
            deltas = rng.integers(0, 3, size=held.shape) - rng.integers(0, held + 1)
            parts.append((table, chosen.astype(np.int64), deltas.astype(np.int64)))
        CountTable.add_row_counts_together(parts, prior=False)
        if tables[0].is_synced:
            synced_at.append(batch)
        if batch % 100 == 0:
            for table in tables:
                assert (table.mu, table.sigma) == pytest.approx(
                    exact_posterior(table), abs=TOLERANCE
                )
    assert synced_at == [342, 684, 1026]
    for table in tables:
        assert (table.mu, table.sigma) == pytest.approx(
            exact_posterior(table), abs=TOLERANCE
        )


def test_tables_with_different_weights_are_added_each_with_its_own() -> None:
    rng = np.random.default_rng(7)
    # Equal weights (distinct objects), then others with other unit weights.
    weights = ([0.0, 0.5, 1.0], [0.0, 0.5, 1.0], [0.0, 0.9, 1.0])
    index, other = (QuestionIndex([f"q{row}" for row in range(5)]) for _ in "ab")
    tables = [CountTable(list(w), 5, index=index) for w in weights]
    alone = [CountTable(list(w), 5, index=other) for w in weights]
    parts = []
    for table in tables:
        table.update("q0", 1)
        rows = np.array([0, 2, 4])
        parts.append((table, rows, rng.integers(0, 4, size=(3, 3))))
    for table in alone:
        table.update("q0", 1)
    CountTable.add_row_counts_together(parts, prior=False)
    for table, (_, rows, deltas) in zip(alone, parts, strict=True):
        table.add_row_counts(rows, deltas, prior=False)
    for together, one in zip(tables, alone, strict=True):
        _assert_alike(together, one)
        assert (together.mu, together.sigma) == pytest.approx(
            exact_posterior(together), abs=TOLERANCE
        )
