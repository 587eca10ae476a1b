"""Hostile payloads for the fuzz tests: what an attacker or a careless client sends.

A fixed list of reproducers from the hostile-input report (issue 15) plus
hypothesis strategies for arbitrary bytes and JSON. None of them is a valid
trial event of a binary run, so a source fed good events with these between
them must count exactly the good ones.
"""

from __future__ import annotations

import json

import numpy as np
from hypothesis import strategies as st

from tests.helpers import trial_events, trial_results

DEEP = 2000
RUN = "bench"

REPRODUCERS: list[bytes] = [
    b"[" * DEEP,
    b"[" * DEEP + b"]" * DEEP,
    b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    b"[" * 990 + b"]" * 990,
    json.dumps(
        {"model": "m0", "question": 0, "trial": "x", "signals": {"a": [[[[[[1]]]]]]}}
    ).encode(),
    json.dumps(
        {"model": "m0", "question": 0, "trial": "y", "cost": [[[[[[[[1]]]]]]]]}
    ).encode(),
    b"[" + b"1," * 2000 + b"1]",
    b"1" * 5000,
    b"\xb2\xff\xfe",
    b'{"model": "m0", "question": 0, "trial": "z", "category": 7}',
    b'{"model": "m0", "question": 0, "trial": "z", "category": NaN}',
    b'{"model": "\\ud800", "question": 0, "trial": "z", "category": 1}',
    b'{"model": "m0", "question": 0, "trial": "z", "category": 1, "run": 5}',
    b"[]",
    b"null",
    b"",
    b" ",
    b'"' + b"x" * 3000 + b'"',
    b'{"model": "m0", "question": 0, "trial": "z", "category": 1e999}',
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)

poison = (
    st.sampled_from(REPRODUCERS)
    | st.binary(max_size=200)
    | json_values.map(lambda value: json.dumps(value).encode())
    | st.integers(min_value=1, max_value=3000).map(lambda depth: b"[" * depth)
    | st.integers(min_value=1, max_value=3000).map(lambda depth: b"{" * depth)
)


def good_stream(seed: int) -> tuple[list[bytes], np.ndarray]:
    """Good events of a binary run (one JSON object each) and their results."""
    results = trial_results(seed, models=2, questions=4, trials=3)
    events = [{"run": RUN, **event} for event in trial_events(results)]
    return [json.dumps(event).encode() for event in events], results


def interleave(good: list[bytes], bad: list[bytes], seed: int) -> list[bytes]:
    """``good`` in order with ``bad`` scattered between them."""
    rng = np.random.default_rng(seed)
    slots = sorted(rng.integers(0, len(good) + 1, size=len(bad)).tolist())
    mixed: list[bytes] = []
    remaining = iter(bad)
    for index, event in enumerate(good):
        while slots and slots[0] == index:
            slots.pop(0)
            mixed.append(next(remaining))
        mixed.append(event)
    mixed.extend(remaining)
    return mixed
