"""Vectorised kernels of the count tables: whole blocks of rows at once.

Functions on arrays that trust their inputs (the tables validate first):
outcome counts per category, the posterior terms of many rows with the
float operations of :func:`~scorio_core.posterior.row_term` in the same
order (so both paths agree to the last bit), the small coercions of a
batch's arguments into integer arrays, and the storage's row scatter and
split of a bulk batch into pieces.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scorio_core import _validation as check
from scorio_core.posterior import VARIANCE_ROUNDOFF, ScaledWeights


def category_counts(
    matrix: NDArray[np.int64], category_count: int
) -> NDArray[np.int64]:
    """Count each category per row of an outcome matrix (one bincount)."""
    rows = matrix.shape[0]
    offsets = category_count * np.arange(rows, dtype=np.int64)
    flat = (matrix + offsets[:, None]).ravel()
    counts = np.bincount(flat, minlength=rows * category_count)
    return counts.reshape(rows, category_count)


def row_terms(
    nu: NDArray[np.int64], scaled: ScaledWeights
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """:func:`row_term` of many rows: the same float operations, in order.

    So a row's terms are equal to the last bit whichever path computed them.
    """
    if nu.shape[1] == 2:
        total = nu[:, 0] + nu[:, 1]
        share = nu[:, 1] / total
        return scaled.unit[1] * share, share * (1.0 - share) / (total + 1)
    total = np.zeros(nu.shape[0], dtype=np.int64)
    first = np.zeros(nu.shape[0])
    second = np.zeros(nu.shape[0])
    for category, (u, u2) in enumerate(
        zip(scaled.unit, scaled.unit_squared, strict=True)
    ):
        counts = nu[:, category]
        total += counts
        first += counts * u
        second += counts * u2
    means = first / total
    variances = (second / total - means * means) / (total + 1)
    if variances.size and float(variances.min()) < -VARIANCE_ROUNDOFF:
        raise FloatingPointError("Bayes@N per-question variance is materially negative")
    return means, np.maximum(variances, 0.0)


def is_category(value: object, category_total: int) -> bool:
    return (
        isinstance(value, int | np.integer)
        and not isinstance(value, bool | np.bool_)
        and 0 <= int(value) < category_total
    )


def count_matrix(
    values: ArrayLike, shape: tuple[int, int], name: str, signed: bool = False
) -> NDArray[np.int64]:
    """Integer counts of ``shape``; non-negative unless ``signed`` (deltas)."""
    array = np.asarray(values)
    if array.size == 0 and shape[0] == 0:
        return np.zeros(shape, dtype=np.int64)
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}; got {array.shape}")
    matrix = check.outcome_matrix(array, name)
    if not signed and matrix.size and int(matrix.min()) < 0:
        raise ValueError(f"{name} counts must be >= 0; got {int(matrix.min())}")
    return matrix


def factorize(
    questions: Sequence[Hashable],
) -> tuple[NDArray[np.int64], list[Hashable]]:
    """Codes into the distinct questions, which keep first-seen order."""
    uniques = list(dict.fromkeys(questions))
    index = dict(zip(uniques, range(len(uniques)), strict=True))
    codes = np.fromiter(map(index.__getitem__, questions), np.int64, len(questions))
    return codes, uniques


def integer_vector(values: ArrayLike, size: int, name: str) -> NDArray[np.int64]:
    array = np.asarray(values)
    if array.shape != (size,):
        raise ValueError(
            f"{name} must have one entry per question ({size}); got shape {array.shape}"
        )
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    vector: NDArray[np.int64] = check.outcome_matrix(array.reshape(1, -1), name)[0]
    return vector


def readonly(array: NDArray[np.int64]) -> NDArray[np.int64]:
    array.setflags(write=False)
    return array


def observed_average(
    observed: NDArray[np.integer],
    prior: NDArray[np.integer],
    variances: NDArray[np.float64],
    scaled: ScaledWeights,
) -> tuple[float, float]:
    """avg@N and ``sigma_a`` of rows of counts (see :attr:`CountTable.avg`).

    ``variances`` holds each row's posterior variance term, by row.

    Raises:
        ValueError: when no trial has been observed.
    """
    means: list[float] = []
    spreads: list[float] = []
    category_count = len(scaled.unit)
    priors = prior.tolist()
    for row, counts in enumerate(observed.tolist()):
        trials = sum(counts)
        if trials == 0:
            continue
        total = trials + sum(priors[row]) + category_count
        means.append(
            sum(n * u for n, u in zip(counts, scaled.unit, strict=True)) / trials
        )
        spreads.append((total / trials) ** 2 * variances[row])
    if not means:
        raise ValueError("avg needs at least one observed trial")
    scale = scaled.scale
    average = scaled.offset + scale * math.fsum(means) / len(means)
    sigma = scale * math.sqrt(math.fsum(spreads)) / len(means)
    return average, sigma


def first_negative_row(
    counts: NDArray[np.integer], rows: NDArray[np.int64], deltas: NDArray[np.int64]
) -> int | None:
    """The first of ``rows`` whose counts plus its deltas go below zero, if any."""
    if not deltas.size or int(deltas.min()) >= 0:
        return None
    retracting = (deltas < 0).any(axis=1)
    touched = rows[retracting]
    bad = (counts[touched] + deltas[retracting] < 0).any(axis=1)
    if not bad.any():
        return None
    return int(touched[np.argmax(bad)])


def split_pieces(sizes: Sequence[int], rows: int) -> list[tuple[int, int]]:
    """Consecutive tables in pieces of about ``rows`` rows (a larger one alone).

    Each piece as (first, end) positions in ``sizes``.
    """
    bounds: list[int] = []
    held = rows
    for position, size in enumerate(sizes):
        if held + size > rows:
            bounds.append(position)
            held = 0
        held += size
    bounds.append(len(sizes))
    return list(itertools.pairwise(bounds))


def set_rows(
    stored: NDArray[np.integer], flat: NDArray[np.int64], counts: NDArray[np.int64]
) -> None:
    """Set rows of ``stored`` (flat row positions) to ``counts`` (as fit).

    Each row seen as one opaque element of its bytes: a fifth of the cost
    of setting rows of a 2-D array (or its cells through flat indices).
    """
    width = stored.shape[-1]
    row = np.dtype((np.void, width * stored.itemsize))
    values = counts.astype(stored.dtype).view(row).reshape(-1)
    stored.reshape(-1, width).view(row).reshape(-1)[flat] = values
