"""Trial streams for engine tests: duplicates, shuffles and corrections."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Event = dict[str, object]


def stream_of(
    results: NDArray[np.int64],
    run: str = "bench",
    models: list[str] | None = None,
) -> list[Event]:
    """One event per (model, question, trial) of a results tensor."""
    names = models or [f"m{index}" for index in range(results.shape[0])]
    return [
        {
            "run": run,
            "model": names[m],
            "question": q,
            "trial": t,
            "category": int(results[m, q, t]),
        }
        for m in range(results.shape[0])
        for q in range(results.shape[1])
        for t in range(results.shape[2])
    ]


def messy(
    events: list[Event], rng: np.random.Generator, categories: int = 2
) -> list[Event]:
    """The same trials, shuffled, with >= 30 % duplicates and some corrections.

    A correction delivers a wrong category first and the right one later, so
    the last write of every trial is its true category.
    """
    shuffled = [events[i] for i in rng.permutation(len(events))]
    out: list[Event] = []
    for event in shuffled:
        if rng.random() < 0.1:
            category = event["category"]
            assert isinstance(category, int)
            wrong = (category + 1) % categories
            out.append({**event, "category": wrong})
        out.append(event)
        while rng.random() < 0.4:
            out.append(dict(event))
    return out


def last_write_wins(events: list[Event]) -> list[Event]:
    """One event per trial key: the last one delivered."""
    latest: dict[tuple[object, ...], Event] = {}
    for event in events:
        latest[(event["run"], event["model"], event["question"], event["trial"])] = (
            event
        )
    return list(latest.values())
