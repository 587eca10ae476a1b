"""The one decoder: JSON bytes and Python objects meet one contract, in one wording.

Property tests hold the two ways in equal (an event as a dict and the same
event as JSON bytes give the same trial, or the same rejection); examples pin
each rule the contract decided (unknown fields, ``ts``, depth, invalid UTF-8,
channels) and the wording of each reason.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor import Monitor
from monitor.inputs.columns import Parsed, Trial, TrialColumns
from monitor.inputs.decode import (
    decode_events,
    decode_object,
    decode_objects,
    decode_payload,
)
from monitor.limits import MAX_DEPTH
from monitor.schema import Rejection, TrialEvent

# Values meant to hit every edge of the schema: ids with control characters
# or too long, bools posing as ints, huge and negative ints, floats that are
# not finite, wrong containers.
ids = st.one_of(
    st.text(max_size=4),
    st.sampled_from(["\ud800", "a\x7f", "\x1f", "é"]),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=3),
    st.just("x" * 256),
    st.just("x" * 257),
    st.integers(min_value=-5, max_value=10**300),
    st.booleans(),
    st.floats(allow_nan=True),
    st.none(),
    st.lists(st.integers(), max_size=1),
)
numbers = st.one_of(
    st.integers(min_value=-3, max_value=2**70),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.none(),
)
costs = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["tokens", "seconds", "dollars"]), numbers, max_size=3
    ),
    st.integers(),
)
fields = {
    "run": ids,
    "model": ids,
    "question": ids,
    "trial": ids,
    "category": numbers,
    "correct": numbers,
    "prior": numbers,
    "ts": numbers,
    "cost": costs,
    "extra": numbers,
}
arbitrary_events = st.fixed_dictionaries(
    {}, optional={name: values for name, values in fields.items()}
)
plain_events: st.SearchStrategy[dict[str, object]] = st.fixed_dictionaries(
    {
        "run": st.sampled_from(["r", "aime25"]),
        "model": st.text(
            alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xD7FF),
            min_size=1,
            max_size=8,
        ),
        "question": st.one_of(st.integers(0, 10**6), st.text("abc019", min_size=1)),
        "trial": st.one_of(st.integers(0, 100), st.text("0123", min_size=1)),
        "category": st.integers(0, 5),
    },
    optional={
        "prior": st.booleans(),
        "ts": st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            st.sampled_from(["2025-01-01", "2025-01-01T12:30:00+02:00"]),
        ),
        "cost": st.fixed_dictionaries(
            {},
            optional={
                "tokens": st.integers(0, 10**6),
                "seconds": st.floats(0, 1e6),
            },
        ),
    },
)


@st.composite
def events(draw: st.DrawFn) -> dict[str, object]:
    """Arbitrary events, and valid ones with one or two fields made odd."""
    if draw(st.booleans()):
        return draw(arbitrary_events)
    value: dict[str, object] = draw(plain_events)
    for name in draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, max_size=2)):
        if draw(st.booleans()):
            value[name] = draw(fields[name])
        else:
            value.pop(name, None)
    return value


def outcome(item: Parsed) -> object:
    """What counts of an item: a trial's fields, or a rejection's kind and reason."""
    if isinstance(item, Trial):
        return tuple(item[:10])
    if isinstance(item, Rejection):
        return (item.kind, item.reason, item.run)
    return item


def as_json(value: dict[str, object]) -> bytes | None:
    """``value`` as JSON bytes, when JSON can say it (finite, valid text)."""
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False).encode()
    except (ValueError, UnicodeEncodeError):
        return None


@settings(max_examples=400, deadline=None)
@given(events())
def test_an_event_decodes_alike_from_a_dict_and_from_json_bytes(
    value: dict[str, object],
) -> None:
    data = as_json(value)
    from_dict = decode_object(value, "src", 3)
    if data is None:
        assert isinstance(from_dict, Trial | Rejection)
        return
    (from_bytes,) = decode_events(data, "src", 3)
    assert outcome(from_dict) == outcome(from_bytes)


@settings(max_examples=200, deadline=None)
@given(plain_events)
def test_plain_valid_events_become_trials_with_their_fields(
    value: dict[str, object],
) -> None:
    trial = decode_object(value)
    assert isinstance(trial, Trial)
    assert (trial.run, trial.model, trial.question, trial.trial) == tuple(
        str(value[name]) for name in ("run", "model", "question", "trial")
    )
    assert (trial.category, trial.from_correct) == (value["category"], False)
    assert trial.prior == value.get("prior", False)
    cost = value.get("cost") or {}
    assert isinstance(cost, dict)
    assert (trial.tokens, trial.seconds) == (cost.get("tokens"), cost.get("seconds"))
    ts = value.get("ts")
    assert trial.ts == (ts if isinstance(ts, float) else None)
    assert trial.ts is None or math.isfinite(trial.ts)


def test_events_with_signals_stay_events_and_a_channel_fills_the_run() -> None:
    event = {"run": "r", "model": "m", "question": 1, "trial": 0, "category": 1}
    signals = decode_object({**event, "signals": {"is_correct": True}})
    assert isinstance(signals, TrialEvent) and signals.question == "1"
    other = decode_object(event, run="other")
    assert isinstance(other, Rejection) and other.kind == "run_mismatch"
    channel = decode_object({k: v for k, v in event.items() if k != "run"}, run="r")
    assert isinstance(channel, Trial) and channel.run == "r"


def test_a_decoded_event_refused_by_its_run_is_worded_in_full() -> None:
    monitor = Monitor()
    monitor.configure({"run": "r", "weights": [0, 0.5, 1]})
    report = monitor.ingest(
        [
            {"run": "r", "model": "m", "question": 1, "trial": 0, "correct": True},
            {"run": "r", "model": "m", "question": 1, "trial": 1, "category": 3},
        ]
    )
    assert report.accepted == 0
    assert [r.kind for r in report.rejected] == ["category", "category"]
    assert "correct is only for binary runs" in report.rejected[0].reason
    assert "category 3 is outside 0..2" in report.rejected[1].reason
    assert '"trial":"1"' in report.rejected[1].raw


EVENT = {"run": "r", "model": "m", "question": 1, "trial": 0, "category": 1}
ID = "1 to 256 characters of text without control characters"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"cots": 3}, 'unknown field "cots"'),
        ({"cost": {"tokens": 1, "dollars": 2}}, 'cost: unknown field "dollars"'),
        ({"cost": {"tokens": -1}}, "cost.tokens: must be an integer >= 0; got -1"),
        ({"cost": 3}, "cost: must be an object with tokens and seconds; got 3"),
        ({"trial": 1.5}, f"trial: must be an integer or {ID}; got 1.5"),
        ({"question": True}, f"question: must be an integer or {ID}; got true"),
        (
            {"category": None, "correct": "yes"},
            'correct: must be true or false; got "yes"',
        ),
        ({"prior": None}, "prior: must be true or false; got null"),
        ({"category": "1"}, 'category: must be an integer >= 0; got "1"'),
        ({"category": -1}, "category: must be an integer >= 0; got -1"),
        ({"category": 1.0}, "category: must be an integer >= 0; got 1.0"),
        (
            {"ts": "yesterday"},
            'ts: must be Unix seconds or an ISO 8601 time; got "yesterday"',
        ),
        ({"ts": True}, "ts: must be Unix seconds or an ISO 8601 time; got true"),
        ({"model": ""}, f'model: must be {ID}; got ""'),
        ({"model": "a\x01"}, f'model: must be {ID}; got "a\\u0001"'),
        ({"model": "m" * 257}, f'model: must be {ID}; got "{"m" * 36}...'),
        (
            {"signals": {"A": 1}},
            "signals: a name must be lowercase letters, digits and _, starting "
            'with a letter, at most 64 characters; got "A"',
        ),
        (
            {"signals": {"a": [1]}},
            "signals.a: must be true, false, a number, a string or null; got [1]",
        ),
        (
            {"signals": {f"s{n}": n for n in range(33)}},
            "signals: must be an object of at most 32 signals; got 33",
        ),
        ({"model": None}, f"model: must be {ID}; got null"),
        ({"category": 1, "correct": False}, "category and correct disagree"),
        ({"category": None}, "needs an outcome"),
    ],
)
def test_each_reason_has_one_wording_on_both_ways_in(
    change: dict[str, object], reason: str
) -> None:
    value = {**EVENT, **change}
    from_dict = decode_object(value)
    (from_bytes,) = decode_events(json.dumps(value).encode())
    assert isinstance(from_dict, Rejection) and isinstance(from_bytes, Rejection)
    assert from_dict.reason == from_bytes.reason
    assert from_dict.kind == from_bytes.kind == "invalid_event"
    assert from_dict.reason.startswith(reason)
    assert from_dict.run == "r"


@pytest.mark.parametrize(
    "ts", [1.7e9, 0, "2025-01-01", "2025-01-01T12:30:00", "2025-01-01T12:30:00Z"]
)
def test_ts_may_be_unix_seconds_or_an_iso_time(ts: object) -> None:
    trial = decode_object({**EVENT, "ts": ts})
    assert isinstance(trial, Trial)
    # Kept as before: a number is stored, a time as text is checked only.
    assert trial.ts == (float(ts) if isinstance(ts, int | float) else None)


@pytest.mark.parametrize("ts", [math.nan, math.inf, "", "yesterday", "12:00 today"])
def test_ts_that_is_no_time_is_refused(ts: object) -> None:
    refused = decode_object({**EVENT, "ts": ts})
    assert isinstance(refused, Rejection) and refused.reason.startswith("ts: ")


def test_an_event_deeper_than_the_contract_allows_is_refused_without_recursion() -> (
    None
):
    nested: object = 1
    for _ in range(MAX_DEPTH + 2):
        nested = [nested]
    value = {**EVENT, "signals": {"a": nested}}
    for refused in (decode_object(value), *decode_events(json.dumps(value))):
        assert isinstance(refused, Rejection)
        assert refused.reason == f"a trial event nests deeper than {MAX_DEPTH} levels"
    # Deeper than any stack: a dict from Python is refused all the same.
    for _ in range(100_000):
        nested = [nested]
    refused = decode_object({**EVENT, "extra": nested})
    assert isinstance(refused, Rejection) and refused.kind == "invalid_event"
    (bracket,) = decode_events(b"[" * 300 + b"]" * 300)
    assert isinstance(bracket, Rejection)
    assert bracket.reason == "invalid JSON: nested too deeply to parse"


def test_invalid_utf8_refuses_its_event_and_never_raises() -> None:
    good = json.dumps(EVENT).encode()
    bad = good.replace(b'"m"', b'"m\xff"')
    for payload in (bad, b"[" + good + b"," + bad + b"]", b"[" + bad + b"]"):
        items = decode_payload(payload, "src")
        refused = [item for item in items if isinstance(item, Rejection)]
        assert [r.kind for r in refused] == ["invalid_json"]
        assert "invalid UTF-8" in refused[0].reason
    # The good event beside it still counts.
    monitor = Monitor()
    report = monitor.ingest_payload(b"[" + good + b"," + bad + b"]", source="http")
    assert (report.accepted, len(report.rejected)) == (1, 1)
    # From Python: a lone surrogate, or bytes where text belongs.
    for model in ("m\ud800", b"m\xff"):
        item = decode_object({**EVENT, "model": model})
        assert isinstance(item, Rejection) and item.kind == "invalid_event"
    escaped = good.replace(b'"m"', b'"\\ud800"')
    (decoded,) = decode_payload(escaped)
    assert isinstance(decoded, Rejection) and decoded.kind == "invalid_json"


def test_an_integer_id_longer_than_python_formats_is_refused_not_raised() -> None:
    huge = 10**5000
    for value in ({**EVENT, "question": huge}, {**EVENT, "trial": -huge}):
        refused = decode_object(value)
        assert isinstance(refused, Rejection) and refused.kind == "invalid_event"
        assert refused.reason.endswith("; got an integer too long to show")
    (from_bytes,) = decode_events(json.dumps(EVENT).replace("1", "1" * 5000, 1))
    assert isinstance(from_bytes, Rejection)
    assert from_bytes.reason == "invalid JSON: a number out of range"


def test_a_lone_surrogate_where_msgspec_words_its_refusal_is_refused_not_raised() -> (
    None
):
    for change in ({"category": "\ud800"}, {"\ud800": 1}):
        refused = decode_object({**EVENT, **change})
        assert isinstance(refused, Rejection) and refused.kind == "invalid_event"
        refused.reason.encode()  # the reason itself is UTF-8 text
    good, bad = decode_objects([EVENT, {**EVENT, "category": "\ud800"}])
    assert isinstance(good, Trial) and isinstance(bad, Rejection)


def test_lists_of_dicts_decode_to_columns_in_one_call() -> None:
    values = [{**EVENT, "trial": trial} for trial in range(5)]
    (columns,) = decode_objects(values, "python")
    assert isinstance(columns, TrialColumns)
    assert columns.trial == ["0", "1", "2", "3", "4"]
    assert [outcome(item) for item in columns.expand()] == [
        outcome(decode_object(value)) for value in values
    ]
    mixed = decode_objects([*values, {**EVENT, "cots": 1}], "python")
    assert [type(item) for item in mixed] == [Trial] * 5 + [Rejection]
    assert isinstance(mixed[5], Rejection) and mixed[5].position == 5


def test_trial_events_from_python_are_checked_as_dicts_are() -> None:
    event = TrialEvent(run="r", model="m", question="1", trial="0", category=-1)
    refused = decode_object(event)
    assert isinstance(refused, Rejection)
    assert refused.reason == "category: must be an integer >= 0; got -1"
    good = decode_object(
        TrialEvent(run="r", model="m", question="1", trial="0", correct=True)
    )
    assert isinstance(good, Trial) and good.question == "1"
    assert TrialEvent.model_validate(EVENT).question == "1"
    with pytest.raises(ValueError, match=r'^unknown field "cots"$'):
        TrialEvent.model_validate({**EVENT, "cots": 1})
