"""Count tables stacked on one CountStorage read like tables on their own.

The tables of a run are layers of one storage, so a batch gathers and
scatters each array once for all of them. Whatever the batch does to the
storage (more rows, another layer, a wider count type), each table must
hold the counts, and to the last bit the posterior, of a table that took
the same changes alone.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scorio_core.storage as count_tables
from scorio_core import CountStorage, CountTable, memory_maps
from scorio_core.question_index import QuestionIndex


def _state(table: CountTable) -> tuple[object, ...]:
    return (
        table.observed_counts.tolist(),
        table.prior_counts.tolist(),
        table.question_trials.tolist(),
        table.trial_count,
        table.prior_trial_count,
        table.questions,
    )


class Twins:
    """Tables on one storage and, for each, a table on its own storage.

    The lone tables share a second index (each on a storage of its own), so
    both sides number the questions alike.
    """

    def __init__(self, weights: list[float], declared: int | None) -> None:
        self.weights = weights
        self.declared = declared
        self.storage = CountStorage(weights, declared)
        self.lone_index = QuestionIndex()
        self.stacked: list[CountTable] = []
        self.alone: list[CountTable] = []

    def add_model(self) -> None:
        self.stacked.append(
            CountTable(self.weights, self.declared, storage=self.storage)
        )
        self.alone.append(
            CountTable(self.weights, self.declared, index=self.lone_index)
        )

    def add_questions(self, count: int) -> None:
        for _ in range(count):
            question = f"q{len(self.lone_index)}"
            self.storage.index.add(question)
            self.lone_index.add(question)

    @property
    def rows(self) -> int:
        return len(self.lone_index)

    def assert_alike(self) -> None:
        for stacked, alone in zip(self.stacked, self.alone, strict=True):
            assert _state(stacked) == _state(alone)
            assert (stacked.mu, stacked.sigma) == pytest.approx(
                (alone.mu, alone.sigma), abs=1e-12
            )
            stacked.resync()
            alone.resync()
            assert (stacked.mu, stacked.sigma) == (alone.mu, alone.sigma)


def _batch(
    twins: Twins, rng: np.random.Generator, prior: bool
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(model, rows, deltas) for some models: small counts, sometimes past
    uint8 or uint16, retractions within what each row holds."""
    width = len(twins.weights)
    chosen_models = rng.choice(
        len(twins.stacked),
        size=int(rng.integers(1, len(twins.stacked) + 1)),
        replace=False,
    )
    batch = []
    for model in sorted(chosen_models.tolist()):
        table = twins.alone[model]
        rows = np.sort(
            rng.choice(
                twins.rows, size=int(rng.integers(1, twins.rows + 1)), replace=False
            )
        ).astype(np.int64)
        held = np.zeros((len(rows), width), dtype=np.int64)
        counted = table.prior_counts if prior else table.observed_counts
        inside = rows < counted.shape[0]
        held[inside] = counted[rows[inside]]
        top = int(rng.choice([3, 300, 70_000], p=[0.8, 0.15, 0.05]))
        deltas = rng.integers(0, top, size=held.shape) - rng.integers(0, held + 1)
        batch.append((model, rows, deltas.astype(np.int64)))
    return batch


def _apply(
    twins: Twins,
    batch: list[tuple[int, np.ndarray, np.ndarray]],
    prior: bool,
    flat: bool,
) -> None:
    if flat:  # the run's way: one call with the rows laid end to end
        twins.storage.add_counts(
            [twins.stacked[model] for model, _, _ in batch],
            [len(rows) for _, rows, _ in batch],
            np.concatenate([rows for _, rows, _ in batch]),
            np.concatenate([deltas for _, _, deltas in batch]),
            prior=prior,
        )
    else:
        CountTable.add_row_counts_together(
            [(twins.stacked[model], rows, deltas) for model, rows, deltas in batch],
            prior=prior,
        )


@settings(max_examples=60, deadline=None)
@given(
    weights=st.sampled_from([[0.0, 1.0], [0.0, 0.2, 1.0], [-1.0, 0.5, 0.25, 2.0]]),
    declared=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    piece_rows=st.sampled_from([1, 4, 16_384]),
)
def test_tables_on_one_storage_equal_tables_on_their_own(
    weights: list[float], declared: bool, seed: int, piece_rows: int
) -> None:
    rng = np.random.default_rng(seed)
    twins = Twins(weights, 40 if declared else None)
    twins.add_questions(int(rng.integers(1, 6)))
    for _ in range(int(rng.integers(1, 4))):
        twins.add_model()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(count_tables, "_TOGETHER_ROWS", piece_rows)
        for _ in range(12):
            if twins.rows < 40 and rng.random() < 0.4:
                # New questions: the storage grows its rows within the batch.
                twins.add_questions(int(rng.integers(1, min(12, 40 - twins.rows) + 1)))
            if rng.random() < 0.3:
                twins.add_model()  # a new model mid-run: another layer
            prior = bool(rng.random() < 0.3)
            batch = _batch(twins, rng, prior)
            _apply(twins, batch, prior, flat=bool(rng.integers(0, 2)))
            for model, rows, deltas in batch:
                twins.alone[model].add_row_counts(rows, deltas, prior=prior)
            # One-cell updates through the memoryviews (re-pointed at each
            # reallocation) on both sides.
            for _ in range(3):
                model = int(rng.integers(0, len(twins.stacked)))
                question = f"q{int(rng.integers(0, twins.rows))}"
                category = int(rng.integers(0, len(weights)))
                for table in (twins.stacked[model], twins.alone[model]):
                    table.update(question, category, prior=prior)
            twins.assert_alike()


@pytest.mark.parametrize("flat", [False, True])
@pytest.mark.parametrize("piece_rows", [1, 16_384])
def test_a_count_going_negative_in_any_table_changes_none(
    flat: bool, piece_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(count_tables, "_TOGETHER_ROWS", piece_rows)
    twins = Twins([0.0, 0.5, 1.0], None)
    twins.add_questions(4)
    for _ in range(3):
        twins.add_model()
    ones = np.ones((4, 3), dtype=np.int64)
    first = [(m, np.arange(4), ones * (m + 1)) for m in range(3)]
    _apply(twins, first, False, flat)
    for model, rows, deltas in first:
        twins.alone[model].add_row_counts(rows, deltas, prior=False)
    # New questions first (the batch would take them in as rows), then a
    # batch whose last table would go below zero on q1.
    twins.add_questions(20)
    batch = [
        (0, np.array([0, 1, 23]), np.full((3, 3), 300)),  # would widen
        (1, np.array([2]), np.ones((1, 3), dtype=np.int64)),
        (2, np.array([1]), np.array([[0, -4, 0]])),  # it holds 3
    ]
    with pytest.raises(ValueError, match="question 'q1' would become negative"):
        _apply(twins, batch, False, flat)
    twins.assert_alike()  # as the tables that never saw the batch
    assert twins.storage._observed.dtype == np.uint8


def test_a_count_past_uint8_widens_every_layer_and_keeps_their_counts() -> None:
    storage = CountStorage([0.0, 1.0], 3)
    tables = [CountTable([0.0, 1.0], 3, storage=storage) for _ in range(4)]
    for position, table in enumerate(tables):
        table.update("a", 1, delta=position + 1)
    assert storage._observed.dtype == np.uint8
    CountTable.add_row_counts_together(
        [
            (tables[0], np.array([0]), np.array([[0, 300]])),
            (tables[2], np.array([0]), np.array([[0, 1]])),
        ],
        prior=False,
    )
    assert storage._observed.dtype == np.uint16
    assert storage._row_trials.dtype == np.uint16
    assert [table.counts("a") for table in tables] == [(0, 301), (0, 2), (0, 4), (0, 4)]
    tables[1].update("b", 0, delta=70_000)  # past uint16, one cell
    assert storage._observed.dtype == np.uint32
    assert [table.question_trials.tolist() for table in tables] == [
        [301, 0],
        [2, 70_000],
        [4, 0],
        [4, 0],
    ]


def test_layers_grow_by_half_and_a_declared_count_bounds_the_rows() -> None:
    storage = CountStorage([0.0, 1.0], 1_000, index=QuestionIndex(range(900)))
    layers = []
    for _ in range(10):
        table = CountTable([0.0, 1.0], 1_000, storage=storage)
        table.update(5, 1)
        layers.append(storage._means.shape[0])
    assert layers == [1, 2, 3, 4, 6, 6, 9, 9, 9, 13]
    assert storage._means.shape[1] == 1_000  # 8 doubled to 1,024, bounded
    assert storage.tables[3] is table or storage.tables[9] is table
    assert all(t.counts(5) == (0, 1) for t in storage.tables)
    reserved = CountStorage([0.0, 1.0], 10, layers=5)
    arrays = reserved._observed
    for _ in range(5):
        CountTable([0.0, 1.0], 10, storage=reserved)
    assert reserved._observed is arrays  # room was made for them up front


def test_a_table_must_fit_its_storage() -> None:
    storage = CountStorage([0.0, 1.0], 5)
    with pytest.raises(ValueError, match="weights"):
        CountTable([0.0, 0.5], 5, storage=storage)
    with pytest.raises(ValueError, match="question_count"):
        CountTable([0.0, 1.0], 6, storage=storage)
    with pytest.raises(ValueError, match="index"):
        CountTable([0.0, 1.0], 5, index=QuestionIndex(), storage=storage)
    other = CountTable([0.0, 1.0], 5)
    with pytest.raises(ValueError, match="on this storage"):
        storage.add_counts([other], [1], np.array([0]), np.array([[1, 0]]), prior=False)
    table = CountTable([0.0, 1.0], 5, storage=storage)
    with pytest.raises(ValueError, match="add up to the rows"):
        storage.add_counts([table], [2], np.array([0]), np.array([[1, 0]]), prior=False)
    with pytest.raises(ValueError, match="rows x 2"):
        storage.add_counts([table], [1], np.array([0]), np.array([[1]]), prior=False)
    assert storage.tables == (table,) and table.trial_count == 0


def test_a_copy_and_a_lone_table_have_storages_of_their_own() -> None:
    storage = CountStorage([0.0, 1.0], 4)
    table = CountTable([0.0, 1.0], 4, storage=storage)
    table.update("a", 1)
    copy = table.copy()
    assert copy._storage is not storage and copy._storage.tables == (copy,)
    copy.update("a", 1)
    assert table.counts("a") == (0, 1) and copy.counts("a") == (0, 2)
    lone = CountTable([0.0, 1.0], 4)
    assert lone._storage.tables == (lone,)


def test_from_state_onto_a_storage_equals_the_same_counts_added() -> None:
    storage = CountStorage([0.0, 0.5, 1.0], None)
    first = CountTable([0.0, 0.5, 1.0], storage=storage)
    first.add_counts(["a", "b"], [[1, 0, 2], [0, 3, 0]])
    restored = CountTable.from_state(
        [0.0, 0.5, 1.0],
        ["c", "a"],
        [[0, 0, 400], [5, 0, 0]],
        [[1, 1, 1], [0, 0, 0]],
        storage=storage,
    )
    assert restored._storage is storage and storage.tables == (first, restored)
    assert restored.questions == ("a", "b", "c")
    alone = CountTable([0.0, 0.5, 1.0])
    alone.add_counts(["a", "b", "c"], [[5, 0, 0], [0, 0, 0], [0, 0, 400]])
    alone.add_counts(["c"], [[1, 1, 1]], prior=True)
    alone.resync()
    assert _state(restored) == _state(alone)
    assert (restored.mu, restored.sigma) == (alone.mu, alone.sigma)
    assert first.counts("b") == (0, 3, 0)  # the widening kept the other layer
    with pytest.raises(ValueError, match="exceed question_count"):
        CountTable.from_state(
            [0.0, 1.0],
            ["a", "b", "c"],
            [[1, 0]] * 3,
            question_count=2,
            storage=CountStorage([0.0, 1.0], 2),
        )


def test_a_large_storage_grows_its_layers_in_place_unless_a_view_is_held() -> None:
    # 200,000 rows: the arrays are memory maps from the first layer on.
    rows = 200_000
    storage = CountStorage([0.0, 1.0], rows, index=QuestionIndex(range(rows)))
    tables = [CountTable([0.0, 1.0], rows, storage=storage)]
    tables[0].update(rows - 1, 1)
    first_map = memory_maps.map_of(storage._means)
    assert first_map is not None
    for layer in range(1, 4):  # 1 -> 2 -> 3 -> 4 layers
        tables.append(CountTable([0.0, 1.0], rows, storage=storage))
        tables[-1].update(rows - 1, 1, delta=layer + 1)
    assert memory_maps.map_of(storage._means) is first_map  # grown in place
    held, _ = tables[0].count_views()  # a view of the maps, held
    tables.append(CountTable([0.0, 1.0], rows, storage=storage))  # 4 -> 6
    assert storage._means.shape[0] == 6
    assert memory_maps.map_of(storage._means) is not first_map  # copied
    assert int(held[rows - 1, 1]) == 1
    tables[-1].update(0, 0)
    assert [table.counts(rows - 1) for table in tables] == [
        (0, 1),
        (0, 2),
        (0, 3),
        (0, 4),
        (0, 0),
    ]
    assert [table.trial_count for table in tables] == [1, 2, 3, 4, 1]
    for table in tables:
        before = (table.mu, table.sigma)
        table.resync()
        assert (table.mu, table.sigma) == pytest.approx(before, abs=1e-12)


def test_a_storage_grows_by_a_copy_where_maps_cannot_grow_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where there is no mremap (macOS) the resize raises SystemError."""

    def no_mremap(buffer: object, size: int) -> None:
        raise SystemError("mmap: resizing not available--no mremap()")

    monkeypatch.setattr(memory_maps, "resize", no_mremap)
    rows = 200_000
    storage = CountStorage([0.0, 1.0], rows, index=QuestionIndex(range(rows)))
    tables = []
    for layer in range(5):
        tables.append(CountTable([0.0, 1.0], rows, storage=storage))
        tables[-1].update(rows - 1, 1, delta=layer + 1)
    assert storage._means.shape[0] >= 5
    assert [table.counts(rows - 1) for table in tables] == [(0, n) for n in range(1, 6)]
    assert [table.trial_count for table in tables] == [1, 2, 3, 4, 5]
