"""A run's history: one summary per look, kept in the store, bounded and thinned.

Each look whose trial count moved on leaves a :class:`HistoryPoint` (the
time, the run's trials, each model's mu, sigma and group, best first). The
dashboard's ranking trace reads them, so it survives a restart and shows a
finished run whole. A run keeps at most :data:`HISTORY_MAX` points: past it,
every other point of the older part is dropped (:func:`to_thin`), so the
first point and the newest half stay while older stretches grow sparser.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

HISTORY_MAX: Final = 1000


class ModelPoint(msgspec.Struct, frozen=True, array_like=True):
    """One model at one look (``group`` None: a joiner not yet placed)."""

    model: str
    mu: float
    sigma: float
    group: int | None


class HistoryPoint(msgspec.Struct, frozen=True):
    """A run at one look: ``models`` best first."""

    ts: float
    trials: int
    models: tuple[ModelPoint, ...]


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(HistoryPoint)


def encode_point(point: HistoryPoint) -> bytes:
    return _encoder.encode(point)


def decode_point(data: bytes | str) -> HistoryPoint:
    return _decoder.decode(data)


def to_thin(count: int, limit: int = HISTORY_MAX) -> list[int]:
    """Positions (0-based, oldest first) to drop from ``count`` points.

    None while ``count <= limit``; past it, every other point between the
    first and the newest ``limit // 2``.

    Examples:
        >>> to_thin(10, limit=10)
        []
        >>> to_thin(11, limit=10)
        [2, 4]
    """
    if count <= limit:
        return []
    recent_from = count - limit // 2
    return list(range(2, recent_from, 2))


def thinned(
    points: Sequence[HistoryPoint], limit: int = HISTORY_MAX
) -> list[HistoryPoint]:
    """``points`` without those :func:`to_thin` drops."""
    drop = set(to_thin(len(points), limit))
    return [point for index, point in enumerate(points) if index not in drop]
