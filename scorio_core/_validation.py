"""Argument checks shared by the public functions of scorio_core.

Every public function validates its arguments here, then hands trusted arrays
to a private kernel. Errors are ``ValueError`` naming the argument and showing
the offending value, so a caller sees at once what to fix.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

_BINARY_WEIGHTS: Final = (0.0, 1.0)


def _show(value: object) -> str:
    """Short repr for error messages; large arrays are summarised."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def outcome_matrix(values: ArrayLike, name: str = "R") -> NDArray[np.int64]:
    """Validate an outcome matrix (M x N, integer categories) and return int64.

    A 1-D input is one question with N trials, as in ``scorio``.
    """
    try:
        array = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a rectangular numeric array") from exc
    if array.ndim == 1:
        array = array.reshape(1, -1)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array; got shape {array.shape}")
    if array.shape[0] == 0:
        raise ValueError(f"{name} must have at least one question (row); got 0")
    if array.shape[1] == 0 and name == "R":
        raise ValueError(f"{name} must have at least one trial (column); got 0")
    return _integer_entries(array, name)


def prior_matrix(values: ArrayLike | None, question_count: int) -> NDArray[np.int64]:
    """Validate an optional prior-outcome matrix R0 with one row per question."""
    if values is None:
        return np.empty((question_count, 0), dtype=np.int64)
    try:
        array = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise ValueError("R0 must be a rectangular numeric array") from exc
    if array.ndim == 1:
        if array.size % question_count:
            raise ValueError(
                f"R0 must have one row per question (M={question_count}); "
                f"got {array.size} entries"
            )
        array = array.reshape(question_count, -1)
    if array.ndim != 2:
        raise ValueError(f"R0 must be a 1-D or 2-D array; got shape {array.shape}")
    if array.shape[0] != question_count:
        raise ValueError(
            f"R0 must have the same number of rows as R (M={question_count}); "
            f"got {array.shape[0]}"
        )
    return _integer_entries(array, "R0")


def _integer_entries(array: NDArray[np.generic], name: str) -> NDArray[np.int64]:
    if np.issubdtype(array.dtype, np.bool_):
        return array.astype(np.int64)
    if np.issubdtype(array.dtype, np.integer):
        return array.astype(np.int64, copy=False)
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(
            f"{name} must hold integer categories; got dtype {array.dtype}"
        )
    if not np.all(np.isfinite(array)):
        bad = array[~np.isfinite(array)].flat[0].item()
        raise ValueError(f"{name} must hold finite integer categories; got {bad!r}")
    if not np.all(array == np.trunc(array)):
        bad = array[array != np.trunc(array)].flat[0].item()
        raise ValueError(f"{name} must hold integer categories; got {bad!r}")
    return array.astype(np.int64)


def weight_vector(
    values: ArrayLike | None, results: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Validate weights w (length C+1); default [0, 1] for binary results."""
    if values is None:
        if results.size and (results.min() < 0 or results.max() > 1):
            found = sorted({int(v) for v in np.unique(results)})
            raise ValueError(
                f"R is not binary (categories {_show(found)}), so w must be given"
            )
        return np.array(_BINARY_WEIGHTS)
    return weights(values)


def weights(values: ArrayLike) -> NDArray[np.float64]:
    """Validate a weight vector on its own (finite, 1-D, at least one entry).

    Complex, string and other non-numeric entries are refused, as in scorio,
    rather than silently converted (``"1"`` would parse, ``1+0j`` would lose
    its imaginary part with only a warning).
    """
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"w must be a 1-D array of finite numbers; got {_show(values)}"
        ) from exc
    if np.issubdtype(raw.dtype, np.complexfloating):
        raise ValueError(f"w must hold real numbers, not complex; got {_show(values)}")
    if not (np.issubdtype(raw.dtype, np.number) or np.issubdtype(raw.dtype, np.bool_)):
        raise ValueError(f"w must hold numbers; got {_show(values)}")
    with np.errstate(over="ignore", invalid="ignore"):
        array = np.asarray(raw, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"w must be a non-empty 1-D array; got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"w must hold finite numbers; got {_show(array.tolist())}")
    return array


def category_range(matrix: NDArray[np.int64], category_count: int, name: str) -> None:
    """Check that every entry is a category 0..C for w of length C+1."""
    if matrix.size == 0:
        return
    low, high = int(matrix.min()), int(matrix.max())
    if low < 0 or high >= category_count:
        bad = low if low < 0 else high
        raise ValueError(
            f"{name} must hold categories in 0..{category_count - 1} "
            f"(len(w) = {category_count}); got {bad}"
        )


def binary_matrix(values: ArrayLike) -> NDArray[np.int64]:
    """Validate a binary (0/1) outcome matrix."""
    matrix = outcome_matrix(values, "R")
    if matrix.size and (matrix.min() < 0 or matrix.max() > 1):
        bad = int(matrix.min()) if matrix.min() < 0 else int(matrix.max())
        raise ValueError(f"R must be binary (0 or 1); got {bad}")
    return matrix


def integer(value: object, name: str) -> int:
    """Accept Python or NumPy integers (not bools); return an int."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer; got {_show(value)}")
    return int(value)


def k_in_range(k: object, trial_count: int) -> int:
    """Check 1 <= k <= N."""
    value = integer(k, "k")
    if not 1 <= value <= trial_count:
        raise ValueError(f"k must be in 1..N (N={trial_count}); got {value}")
    return value


def confidence(value: object) -> float:
    """Check a confidence level strictly inside (0, 1)."""
    number = real(value, "confidence")
    if not 0.0 < number < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {_show(value)}")
    return number


def real(value: object, name: str) -> float:
    """Accept a finite real scalar (not a bool)."""
    if isinstance(value, bool | np.bool_) or not isinstance(
        value, int | float | np.integer | np.floating
    ):
        raise ValueError(f"{name} must be a finite number; got {_show(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number; got {_show(value)}")
    return number


def positive(value: object, name: str) -> float:
    number = real(value, name)
    if number <= 0.0:
        raise ValueError(f"{name} must be > 0; got {_show(value)}")
    return number


def bounds(value: tuple[float, float] | None) -> tuple[float, float] | None:
    """Check optional clipping bounds (lo, hi) with lo <= hi."""
    if value is None:
        return None
    try:
        low, high = value
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bounds must be a pair (lo, hi); got {_show(value)}") from exc
    low_f, high_f = real(low, "bounds[0]"), real(high, "bounds[1]")
    if low_f > high_f:
        raise ValueError(f"bounds must satisfy lo <= hi; got {_show(value)}")
    return low_f, high_f


def unit_interval(value: object, name: str) -> float:
    number = real(value, name)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must be in [0, 1]; got {_show(value)}")
    return number


def real_vector(values: object, name: str) -> NDArray[np.float64]:
    """Any-shape array of finite real numbers (bools allowed), as float64."""
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a numeric array; got {_show(values)}"
        ) from exc
    if np.issubdtype(raw.dtype, np.complexfloating):
        raise ValueError(f"{name} must hold real values, not complex values")
    if not (np.issubdtype(raw.dtype, np.number) or np.issubdtype(raw.dtype, np.bool_)):
        raise ValueError(f"{name} must hold only numeric values; got {_show(values)}")
    with np.errstate(over="ignore", invalid="ignore"):
        array = np.asarray(raw, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite; got {_show(values)}")
    return array
