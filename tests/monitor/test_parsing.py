"""The fast check of plain events agrees with the full event schema."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from monitor import Monitor
from monitor.inputs.parsing import Trial, parse_object, plain_trial
from monitor.schema import TrialEvent

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
        "ts": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.text()),
        "cost": st.fixed_dictionaries(
            {},
            optional={
                "tokens": st.integers(0, 10**6),
                "seconds": st.floats(0, 1e6),
            },
        ),
        "note": st.text(),
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


def same_as_schema(value: dict[str, object], trial: Trial) -> None:
    event = TrialEvent.model_validate(value)
    assert (trial.run, trial.model, trial.question, trial.trial) == (
        event.run,
        event.model,
        event.question,
        event.trial,
    )
    assert trial.category == event.outcome
    assert trial.from_correct == (event.category is None)
    assert trial.prior == event.prior
    assert trial.tokens == (None if event.cost is None else event.cost.tokens)
    assert trial.seconds == (None if event.cost is None else event.cost.seconds)
    expected_ts = event.ts if isinstance(event.ts, float) else None
    assert trial.ts == expected_ts
    assert trial.ts is None or math.isfinite(trial.ts)


@settings(max_examples=3000, deadline=None)
@given(events())
def test_the_fast_check_accepts_only_what_the_schema_accepts(
    value: dict[str, object],
) -> None:
    trial = plain_trial(value)
    if trial is None:
        return
    try:
        same_as_schema(value, trial)
    except ValidationError as error:
        raise AssertionError(f"fast check accepted an invalid event: {error}") from None


@settings(max_examples=1000, deadline=None)
@given(plain_events)
def test_plain_valid_events_take_the_fast_path(value: dict[str, object]) -> None:
    trial = plain_trial(value)
    assert trial is not None
    same_as_schema(value, trial)


def test_events_with_signals_or_a_mismatched_channel_take_the_full_path() -> None:
    event = {"run": "r", "model": "m", "question": 1, "trial": 0, "category": 1}
    assert plain_trial({**event, "signals": {"is_correct": True}}) is None
    assert plain_trial(event, run="other") is None
    assert plain_trial({**event, "model": "\ud800"}) is None  # a lone surrogate
    channel = parse_object({k: v for k, v in event.items() if k != "run"}, run="r")
    assert isinstance(channel, Trial) and channel.run == "r"


def test_a_fast_parsed_event_refused_by_its_run_is_worded_in_full() -> None:
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
