"""The batch path of the count tables: many trials or count deltas at once.

Functions over a :class:`~scorio_core.counts.CountTable` and its
:class:`~scorio_core.storage.CountStorage` that validate a batch (all or
nothing: every check before any write), number its questions and hand the
checked deltas to the storage, which adds them to the rows as whole arrays
with the float operations of :meth:`CountTable.update`. The table's batch
methods (``update_many``, ``add_counts``, ``add_row_counts``,
``add_row_counts_together``, ``merge``) delegate here; they read the table
through its public surface and the package-internal ``storage``,
``take_rows`` and ``add_row``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core.count_kernels import (
    count_matrix,
    factorize,
    first_negative_row,
    integer_vector,
)

if TYPE_CHECKING:
    from scorio_core.counts import CountTable

Part = tuple["CountTable", NDArray[np.int64], NDArray[np.int64]]


def declare(table: CountTable, questions: Iterable[Hashable]) -> None:
    """Register questions before any trial (they contribute their prior)."""
    known = table.storage.index.rows
    for question in questions:
        if question not in known:
            table.add_row(question)


def update_many(
    table: CountTable,
    questions: Sequence[Hashable],
    categories: ArrayLike,
    deltas: ArrayLike | None = None,
    *,
    prior: bool = False,
) -> None:
    """Vectorized :meth:`CountTable.update` of many trials; all or nothing.

    The deltas are aggregated per question and category first, so a batch
    costs O(len(batch) + distinct questions x C).
    """
    size = len(questions)
    category_array = integer_vector(categories, size, "categories")
    width = table.category_count
    check.category_range(category_array, width, "categories")
    delta_array = (
        np.ones(size, dtype=np.int64)
        if deltas is None
        else integer_vector(deltas, size, "deltas")
    )
    if size == 0:
        return
    codes, uniques = factorize(questions)
    aggregated = (
        np.bincount(
            codes * width + category_array,
            weights=delta_array,
            minlength=len(uniques) * width,
        )
        .astype(np.int64)
        .reshape(len(uniques), width)
    )
    apply_aggregated(table, uniques, aggregated, prior)


def add_counts(
    table: CountTable,
    questions: Sequence[Hashable],
    deltas: ArrayLike,
    *,
    prior: bool = False,
) -> None:
    """Add count deltas per question and category; all or nothing.

    Args:
        table: The table to change.
        questions: Distinct question ids, one per row of ``deltas``.
        deltas: ``len(questions) x (C+1)`` integer changes (negative to
            retract), e.g. a batch already summed per question.
        prior: Whether the deltas are prior-outcome counts.
    """
    block = count_matrix(
        deltas, (len(questions), table.category_count), "deltas", signed=True
    )
    if len(set(questions)) != len(questions):
        raise ValueError("questions must be distinct")
    apply_aggregated(table, list(questions), block, prior)


def apply_aggregated(
    table: CountTable, questions: list[Hashable], deltas: NDArray[np.int64], prior: bool
) -> None:
    """Add a ``questions x categories`` block of deltas; all or nothing.

    Checks first, then updates the touched rows as whole arrays; each
    row's terms are the ones :meth:`CountTable.update` would compute.
    """
    storage = table.storage
    known = storage.index.rows
    found: list[int | None] = [known.get(question) for question in questions]
    observed, prior_counts = table.count_views()  # takes the index's rows in
    counts = prior_counts if prior else observed
    # Only rows with a retraction can fail the checks below.
    for index in np.flatnonzero((deltas < 0).any(axis=1)).tolist():
        row, question = found[index], questions[index]
        if row is None:
            raise ValueError(f"cannot retract a trial of unseen question {question!r}")
        if (counts[row] + deltas[index] < 0).any():
            raise ValueError(f"a count on question {question!r} would become negative")
    new_count = found.count(None)
    declared = storage.declared_count
    if declared is not None and len(storage.index) + new_count > declared:
        raise ValueError(
            f"{len(storage.index) + new_count} distinct questions "
            f"exceed question_count={declared}"
        )
    if new_count:
        found = [
            table.add_row(question) if row is None else row
            for question, row in zip(questions, found, strict=True)
        ]
    storage.add_rows(table, np.fromiter(found, np.int64, len(found)), deltas, prior)


def add_row_counts(
    table: CountTable,
    rows: NDArray[np.int64],
    deltas: NDArray[np.int64],
    *,
    prior: bool,
) -> None:
    """:func:`add_counts` by row of the shared question index; all or nothing.

    For callers that numbered the questions already (every table of an
    index shares its rows): no lookup per question. ``rows`` must be
    distinct rows of the index.
    """
    check_rows(table, rows, deltas, prior)
    table.storage.add_rows(table, rows, deltas, prior)


def add_row_counts_together(parts: Sequence[Part], *, prior: bool) -> None:
    """:func:`add_row_counts` of several tables in one pass; all or nothing.

    ``parts``: (table, rows, deltas) of distinct tables. Tables on one
    :class:`~scorio_core.storage.CountStorage` (the models of one run) are
    updated together (:meth:`CountStorage.add_counts`), with the float
    operations each table's own update uses. Every table is checked first:
    on ``ValueError`` none changed.
    """
    parts = [part for part in parts if len(part[1])]
    if not parts:
        return
    if len(parts) == 1:
        table, rows, deltas = parts[0]
        add_row_counts(table, rows, deltas, prior=prior)
        return
    groups: dict[int, list[Part]] = {}
    for part in parts:
        groups.setdefault(id(part[0].storage), []).append(part)
    if len(groups) > 1:
        # A storage is written before the next is checked: check all first.
        for table, rows, deltas in parts:
            check_rows(table, rows, deltas, prior)
    for group in groups.values():
        group[0][0].storage.add_counts(
            [part[0] for part in group],
            [len(part[1]) for part in group],
            np.concatenate([part[1] for part in group]),
            np.concatenate([part[2] for part in group]),
            prior=prior,
        )


def check_rows(
    table: CountTable, rows: NDArray[np.int64], deltas: NDArray[np.int64], prior: bool
) -> None:
    """Raise if adding ``deltas`` to ``rows`` would make a count negative."""
    observed, prior_counts = table.count_views()
    bad = first_negative_row(prior_counts if prior else observed, rows, deltas)
    if bad is not None:
        question = table.storage.index.questions[bad]
        raise ValueError(f"a count on question {question!r} would become negative")


def merge(table: CountTable, other: CountTable) -> None:
    """Fold in another table's counts (e.g. a shard from another worker).

    Raises:
        ValueError: when the weights or declared question counts differ.
    """
    if not np.array_equal(table.weights, other.weights):
        raise ValueError("cannot merge count tables with different weights")
    declared, others = table.storage.declared_count, other.storage.declared_count
    if others != declared:
        raise ValueError(
            "cannot merge count tables with different question_count "
            f"({declared} vs {others})"
        )
    questions = list(other.questions)
    if not questions:
        return
    apply_aggregated(table, questions, other.observed_counts, prior=False)
    apply_aggregated(table, questions, other.prior_counts, prior=True)
