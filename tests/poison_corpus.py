"""One poison corpus for every source: good trial events with poison between them.

Each case is one JSON payload as bytes (one event per payload, so every
source can carry it: a body, a message, a stream entry, a line) and the
verdict the trial contract gives it. The contract (issue 24) says, for a
binary run ``bench`` with weights ``[0, 1]``:

- an event is an object with ``run``, ``model``, ``question``, ``trial``
  (ids: non-empty strings of at most ``MAX_ID_LENGTH`` characters; question
  and trial may be integers too) and an outcome (``category`` an integer of
  the run's range, or ``correct`` a boolean); optionally ``prior`` (a
  boolean), ``cost`` (``tokens`` a non-negative integer, ``seconds`` a
  non-negative finite number), ``ts`` (a finite number or an ISO 8601
  date and time) and ``signals`` (flat: a name to a scalar);
- anything else is refused with one reason, whatever the source: invalid
  UTF-8, lone surrogates, wrong types, unknown (misspelt) fields, values
  nested deeper than ``MAX_DEPTH``, numbers that overflow, empty or
  overlong ids, payloads over ``MAX_PAYLOAD_BYTES``, JSON that is not an
  event, a category outside the run's range, and an event naming another
  run than the channel it arrived on.

Good events use models ``m0`` and ``m1`` and questions ``g<n>``; poison
events use question ``p-<case>``, so every trial id is distinct and the
good ones are counted exactly, whatever a source does with the poison.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Final

from monitor.limits import MAX_PAYLOAD_BYTES

RUN = "bench"
OTHER_RUN = "other"
NESTING = 250
# A field given as this is left out of the event.
DROP: Final = object()
BRACKETS = 2000


@dataclass(frozen=True, slots=True)
class Case:
    """One payload and the contract's verdict on it.

    ``model`` and ``question`` are the ids a counted event would have
    (poison: the question it names, if any). ``channel_only``: the case
    needs a channel that implies the run (an HTTP route, an MQTT topic, a
    stream key); sources without one skip it. ``bytes_only``: the case is
    about the payload's bytes, which a decoded value no longer has (its
    size); the Python API's dict path skips it.
    """

    name: str
    payload: bytes
    good: bool
    model: str = ""
    question: str = ""
    channel_only: bool = False
    bytes_only: bool = False

    @property
    def has_raw_newline(self) -> bool:
        """Whether the payload cannot be one line of a JSON-lines file."""
        return b"\n" in self.payload or b"\r" in self.payload


def _event(question: str, **fields: object) -> dict[str, object]:
    return {"run": RUN, "model": "m0", "question": question, "trial": 0, **fields}


def _poison(name: str, **fields: object) -> Case:
    """A poison event: a good one with ``fields`` changed (``DROP`` drops one)."""
    event = _event(f"p-{name}", category=1) | fields
    payload = {key: value for key, value in event.items() if value is not DROP}
    return Case(name, json.dumps(payload).encode(), False, "m0", f"p-{name}")


def _raw(name: str, payload: bytes) -> Case:
    return Case(name, payload, False, "m0", f"p-{name}")


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def _over_limit() -> bytes:
    """A good event padded with whitespace to one byte over the limit."""
    event = json.dumps(_event("p-over_limit", category=1)).encode()
    return event + b" " * (MAX_PAYLOAD_BYTES + 1 - len(event))


def _poison_cases() -> list[Case]:
    return [
        # Invalid UTF-8 and lone surrogates.
        _raw(
            "utf8_in_string",
            b'{"run": "bench", "model": "m\xff", "question": "p-utf8_in_string", '
            b'"trial": 0, "category": 1}',
        ),
        _raw("utf8_lone_byte", b"\xff"),
        _raw(
            "utf8_truncated_sequence",
            b'{"run": "bench", "model": "m\xc3", "question": '
            b'"p-utf8_truncated_sequence", "trial": 0, "category": 1}',
        ),
        _raw(
            "utf8_overlong_slash",
            b'{"run": "bench", "model": "m0", "question": "p-utf8_overlong_slash", '
            b'"trial": "\xc0\xaf", "category": 1}',
        ),
        _raw(
            "utf8_encoded_surrogate",
            b'{"run": "bench", "model": "\xed\xa0\x80", "question": '
            b'"p-utf8_encoded_surrogate", "trial": 0, "category": 1}',
        ),
        _raw(
            "utf8_in_field_name",
            b'{"run": "bench", "model": "m0", "question": "p-utf8_in_field_name", '
            b'"trial": 0, "category": 1, "no\xfete": 1}',
        ),
        _raw(
            "utf8_in_run",
            b'{"run": "ben\xffch", "model": "m0", "question": "p-utf8_in_run", '
            b'"trial": 0, "category": 1}',
        ),
        _raw(
            "surrogate_in_id",
            b'{"run": "bench", "model": "\\ud800", "question": "p-surrogate_in_id", '
            b'"trial": 0, "category": 1}',
        ),
        _raw(
            "raw_newline_in_string",
            b'{"run": "bench", "model": "m\n0", "question": "p-raw_newline_in_string", '
            b'"trial": 0, "category": 1}',
        ),
        _poison("control_char_in_id", model="m\x00"),
        # Wrong types, one field at a time.
        _poison("trial_float", trial=1.5),
        _poison("trial_bool", trial=True),
        _poison("correct_string", category=DROP, correct="yes"),
        _poison("category_string", category="1"),
        _poison("category_bool", category=True),
        _poison("question_null", question=None),
        _poison("model_number", model=5),
        _poison("prior_number", prior=1),
        _poison("tokens_negative", cost={"tokens": -1}),
        _poison("seconds_string", cost={"seconds": "NaN"}),
        _raw(
            "category_nan_literal",
            b'{"run": "bench", "model": "m0", "question": "p-category_nan_literal", '
            b'"trial": 0, "category": NaN}',
        ),
        _poison("category_negative", category=-1),
        _poison("category_and_correct_disagree", category=0, correct=True),
        _poison("no_outcome", category=DROP),
        # Typos and unknown fields.
        _poison("typo_cots", cots={"tokens": 5}),
        _poison("typo_catgory", category=DROP, catgory=1),
        _poison("unknown_field", note="x"),
        _poison("ts_word", ts="yesterday"),
        _poison("ts_not_a_date", ts="2026-13-45T99:00:00Z"),
        _poison("ts_bool", ts=True),
        # Deep nesting.
        _poison("deep_unknown_field", extra=_nested(NESTING)),
        _poison("deep_cost", cost=_nested(NESTING)),
        _poison("deep_signals", signals={"deep": _nested(NESTING)}),
        _raw("brackets_unclosed", b"[" * BRACKETS),
        _raw(
            "brackets_balanced",
            b"[" * (BRACKETS // 2) + b"]" * (BRACKETS // 2),
        ),
        # Overflow.
        _raw(
            "category_1e400",
            b'{"run": "bench", "model": "m0", "question": "p-category_1e400", '
            b'"trial": 0, "category": 1e400}',
        ),
        _poison("category_huge_int", category=99999999999999999999999),
        _raw(
            "tokens_1e309",
            b'{"run": "bench", "model": "m0", "question": "p-tokens_1e309", '
            b'"trial": 0, "category": 1, "cost": {"tokens": 1e309}}',
        ),
        # Empty and huge.
        _poison("empty_id", question=""),
        _poison("long_id", model="m" * 10_000),
        Case("over_limit", _over_limit(), False, "m0", "p-over_limit", bytes_only=True),
        # JSON that is not an event.
        _raw("empty_array", b"[]"),
        _raw("bare_number", b"5"),
        _raw("json_string", b'"bench"'),
        _raw("json_null", b"null"),
        # Valid events this run refuses.
        _poison("category_out_of_range", category=2),
        Case(
            "run_mismatch",
            json.dumps(_event("p-run_mismatch", category=1, run=OTHER_RUN)).encode(),
            False,
            "m0",
            "p-run_mismatch",
            channel_only=True,
        ),
    ]


def _good_cases(count: int) -> list[Case]:
    """Good events in the forms the contract allows."""
    forms: list[dict[str, object]] = [
        {"category": 1},
        {"correct": False},
        {"category": 0, "cost": {"tokens": 812, "seconds": 4.2}},
        {"correct": True, "ts": 1764237600.5},
        {"category": 1, "ts": "2026-11-27T10:00:00Z"},
        {"category": 0, "prior": False},
        {"category": 1, "correct": True},
        {"category": 0, "cost": {"tokens": 0}},
        {"correct": False, "ts": "2026-11-27T12:00:00.250+02:00"},
        {"category": 0, "ts": 1764237600},
        {"category": 1, "signals": {"has_box": True, "output_tokens": 812}},
    ]
    cases = []
    for index in range(count):
        model = f"m{index % 2}"
        # Integer ids are good ids too (they become strings).
        question = f"g{index}" if index % 3 else 1000 + index
        event: dict[str, object] = {
            "run": RUN,
            "model": model,
            "question": question,
            "trial": index % 4,
            **forms[index % len(forms)],
        }
        payload = json.dumps(event).encode()
        cases.append(Case(f"good_{index}", payload, True, model, str(question)))
    return cases


def corpus() -> list[Case]:
    """Every case, a good event before and after each poison one."""
    poison = _poison_cases()
    good = _good_cases(len(poison) + 1)
    cases = [good[0]]
    for bad, after in zip(poison, good[1:], strict=True):
        cases.extend([bad, after])
    return cases


def good_counts(cases: list[Case]) -> Counter[str]:
    """Good trials per model among ``cases``."""
    return Counter(case.model for case in cases if case.good)
