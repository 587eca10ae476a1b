"""The fast path (arrays into columns) agrees with decoding event by event.

For arbitrary payloads (valid, invalid, mixed batches, poison elements,
hostile bytes) :func:`decode_payload` and :func:`decode_events` give the same
trials, and a monitor fed columns accepts, refuses (with the same reasons,
kinds and positions) and counts exactly what one fed event by event does.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor import Monitor
from monitor.feeds.files import with_implied_run
from monitor.inputs.columns import Parsed, Trial, TrialColumns
from monitor.inputs.decode import Decoded, decode_events, decode_payload
from monitor.inputs.factors import Factors
from monitor.schema import Rejection
from monitor.stores.records import IngestReport
from tests.hostile import poison
from tests.monitor.test_decode import events as odd_events

# Events that are mostly valid for the runs below, so batches are taken
# whole, taken partly (a refused row) or declined; every field can be odd.
near_events = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["a", "b", "c", "zz"]),
        "question": st.one_of(st.integers(0, 6), st.sampled_from(["1", "q", "01"])),
        "trial": st.one_of(st.integers(0, 3), st.sampled_from(["0", "t"])),
    },
    optional={
        "run": st.sampled_from(["r", "r", "s", "", None]),
        "category": st.one_of(st.integers(-1, 3), st.none(), st.just(True)),
        "correct": st.one_of(st.booleans(), st.none()),
        "prior": st.one_of(st.booleans(), st.none()),
        "ts": st.one_of(
            st.integers(-(2**60), 2**60),
            st.floats(allow_nan=False),
            st.just("2025-01-01"),
            st.none(),
        ),
        "cost": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={
                    "tokens": st.one_of(st.integers(-1, 10), st.none()),
                    "seconds": st.one_of(st.floats(-1.0, 1e9), st.integers(0, 9)),
                },
            ),
        ),
        "signals": st.one_of(st.none(), st.just({"is_correct": True})),
    },
)
# Valid for most of the runs below: arrays of them take the fast path.
clean_events = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["a", "b"]),
        "question": st.one_of(st.integers(0, 4), st.sampled_from(["1", "q"])),
        "trial": st.one_of(st.integers(0, 3), st.just("0")),
        "correct": st.booleans(),
        "run": st.just("r"),
    },
    optional={
        "category": st.integers(0, 2),
        "prior": st.booleans(),
        "ts": st.one_of(st.integers(0, 2**40), st.floats(0, 1e10), st.just("now")),
        "cost": st.fixed_dictionaries(
            {}, optional={"tokens": st.integers(0, 99), "seconds": st.floats(0, 9)}
        ),
    },
).map(
    lambda event: (
        event
        if event.get("category", 0) == event["correct"]
        else {key: value for key, value in event.items() if key != "correct"}
    )
)
# Ids and ``correct`` only (the commonest arrays), some of them odd.
binary_events = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["a", "b"]),
        "question": st.one_of(st.integers(0, 4), st.sampled_from(["1", "q", ""])),
        "trial": st.one_of(st.integers(0, 3), st.just("0"), st.just(True)),
        "correct": st.one_of(st.booleans(), st.booleans(), st.none(), st.just(1)),
    },
    # Runs JSON escapes (the engine guesses an array's run from its bytes).
    optional={"run": st.sampled_from(["r", "r", "s", "\u00e9", 'q"x', "run"])},
)
# Ids and ``correct`` with integer question and trial ids (read into arrays):
# narrow and wide spans, negative ids, ids past int64.
numbered_events = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["a", "b"]),
        "question": st.one_of(
            st.integers(0, 4), st.integers(-(2**40), 2**40), st.just(2**64)
        ),
        "trial": st.one_of(st.integers(0, 3), st.integers(-3, 2**17)),
        "correct": st.one_of(st.booleans(), st.booleans(), st.booleans(), st.none()),
    },
    optional={"run": st.sampled_from(["r", "r", "r", "s", "\u00e9"])},
)
# Integer ids and ``category`` only (rubric runs' commonest arrays).
numbered_category_events = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["a", "b"]),
        "question": st.one_of(st.integers(0, 4), st.integers(0, 4), st.just(2**64)),
        "trial": st.one_of(st.integers(0, 3), st.integers(-3, 2**17)),
        # Mostly valid, so that whole arrays take the fast path; then and
        # again a negative, too large or boolean category.
        "category": st.one_of(
            *[st.integers(0, 2)] * 12, st.just(-1), st.just(2**63), st.just(True)
        ),
        "run": st.sampled_from(["r"] * 8 + ["s"]),
    },
)
elements = st.one_of(
    clean_events, clean_events, clean_events, near_events, odd_events()
)


@st.composite
def payloads(draw: st.DrawFn) -> bytes:
    """An event, an array of them, or bytes that are not quite either."""
    kind = draw(
        st.sampled_from(
            [
                "one",
                "clean",
                "clean",
                "binary",
                "numbered",
                "numbered_category",
                "escaped",
                "array",
                "array",
                "poison",
                "bytes",
            ]
        )
    )
    if kind == "poison":
        return draw(poison)
    if kind == "one":
        text = json.dumps(draw(elements))
    elif kind == "clean":
        text = json.dumps(draw(st.lists(clean_events, min_size=1, max_size=8)))
    elif kind == "binary":
        text = json.dumps(draw(st.lists(binary_events, min_size=1, max_size=8)))
    elif kind == "numbered":
        text = json.dumps(draw(st.lists(numbered_events, min_size=1, max_size=8)))
    elif kind == "numbered_category":
        events = st.lists(numbered_category_events, min_size=1, max_size=8)
        text = json.dumps(draw(events))
    elif kind == "escaped":
        # The same run, written plainly in some events and escaped in others.
        text = json.dumps(draw(st.lists(numbered_events, min_size=1, max_size=8)))
        for _ in range(draw(st.integers(0, text.count('"run": "r"')))):
            text = text.replace('"run": "r"', '"run": "\\u0072"', 1)
    else:
        text = json.dumps(draw(st.lists(elements, min_size=0, max_size=12)))
    if kind == "bytes":
        # Whitespace JSON allows (or only Python's strip does), a BOM, a cut.
        prefix = draw(st.sampled_from([b"", b" \n", b"\x0c", b"\xef\xbb\xbf"]))
        data = prefix + text.encode()
        return data[: draw(st.integers(0, len(data)))] if draw(st.booleans()) else data
    return text.encode()


def fields(item: Parsed) -> object:
    """What counts of an item: a trial's fields without its raw mapping."""
    return tuple(item[:10]) if isinstance(item, Trial) else item


def flat(parsed: list[Decoded]) -> list[Parsed]:
    items: list[Parsed] = []
    for item in parsed:
        if isinstance(item, TrialColumns):
            items.extend(item.expand())
        else:
            items.append(item)
    return items


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(payloads(), st.sampled_from([None, "r"]), st.sampled_from([None, 7]))
def test_decode_payload_gives_what_decode_events_gives(
    payload: bytes, channel: str | None, position: int | None
) -> None:
    slow = decode_events(payload, "src", position, run=channel, max_items=8)
    fast = decode_payload(payload, "src", position, run=channel, max_items=8)
    assert [fields(item) for item in flat(fast)] == [fields(item) for item in slow]
    if len(fast) == 1 and isinstance(fast[0], TrialColumns):
        columns = fast[0]
        assert all(isinstance(item, Trial) for item in slow)
        trials = [item for item in slow if isinstance(item, Trial)]
        assert columns.run == trials[0].run
        assert {trial.run for trial in trials} == {columns.run}
        rows = zip(
            columns.model,
            columns.question,
            columns.trial,
            columns.category,
            columns.prior,
            columns.tokens,
            columns.seconds,
            columns.ts,
            strict=True,
        )
        assert list(rows) == [tuple(trial[1:9]) for trial in trials]
        assert columns.from_correct == any(trial.from_correct for trial in trials)
        assert list(columns.models) == list(dict.fromkeys(t.model for t in trials))
        assert list(columns.questions) == list(
            dict.fromkeys(t.question for t in trials)
        )
        # The arrays handed to the engine's vectorised steps match the columns:
        # distinct values in first-seen order, but for trial ids, which may
        # be their own codes (the values then run 0..max).
        for name in ("model", "question", "trial"):
            factors, column = columns.factors[name], getattr(columns, name)
            assert [factors.values[code] for code in factors.codes] == column
            if factors.numbers is not None:
                assert factors.values == [str(n) for n in factors.numbers.tolist()]
            if name == "trial" and factors.values != Factors.of(column).values:
                assert factors.codes.tolist() == [int(trial) for trial in column]
                assert factors.values == [str(n) for n in range(len(factors.values))]
                continue
            expected = Factors.of(column)
            assert factors.values == expected.values
            assert factors.codes.tolist() == expected.codes.tolist()
        if max(columns.category) < 2**63:
            assert columns.categories is not None
            assert columns.categories.tolist() == columns.category
        else:  # past int64: no array, the engine reads the list
            assert columns.categories is None
    elif fast != slow:
        # Only a single plain trial may differ, by the raw mapping it keeps.
        assert len(fast) == 1 and isinstance(fast[0], Trial)


runs = st.sampled_from(
    [
        {"run": "r"},
        {"run": "r", "question_count": 3},
        {"run": "r", "models": ["a", "b"]},
        {"run": "r", "questions": ["0", "1", "2", "q"]},
        {"run": "r", "weights": [0, 0.5, 1]},
        None,
    ]
)


def report_of(report: IngestReport) -> tuple[object, ...]:
    return (
        report.accepted,
        report.duplicates,
        report.corrections,
        [
            (r.kind, r.reason, r.source, r.position, r.run, r.raw)
            for r in report.rejected
        ],
        report.runs,
    )


def ingested(
    parse: Callable[..., Sequence[Decoded]],
    monitor: Monitor,
    batch: list[bytes],
    channel: str | None,
) -> object:
    """Each payload through ``parse``, then one ``ingest_parsed`` call."""
    parsed: list[Decoded] = []
    positions: list[int | None] = []
    for payload in batch:
        items = parse(payload, "src", run=channel)
        parsed.extend(items)
        positions.extend(range(len(items)))
    report = monitor.ingest_parsed(
        with_implied_run(monitor, parsed), source="src", positions=positions
    )
    return report_of(report)


def event_path(monitor: Monitor, batch: list[bytes], channel: str | None) -> object:
    """Event by event: decode_events per payload."""
    return ingested(decode_events, monitor, batch, channel)


def wire_path(monitor: Monitor, batch: list[bytes], channel: str | None) -> object:
    return ingested(decode_payload, monitor, batch, channel)


def state_of(monitor: Monitor) -> object:
    statuses = []
    for run in monitor.runs:
        status = monitor.status(run)
        statuses.append(
            (
                run,
                status.trials,
                status.prior_trials,
                status.duplicates,
                status.corrections,
                status.rejected,
                [(m.model, m.trials, m.mu, m.cost_tokens) for m in status.models],
            )
        )
    letters = [
        (d.run, d.reason, d.position, d.raw) for d in monitor.store.dead_letters()
    ]
    return statuses, letters


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(
    runs,
    st.sampled_from([None, "r"]),
    st.lists(st.lists(payloads(), min_size=1, max_size=4), min_size=1, max_size=3),
)
def test_a_monitor_fed_columns_counts_and_refuses_as_one_fed_event_by_event(
    config: dict[str, object] | None,
    channel: str | None,
    calls: list[list[bytes]],
) -> None:
    slow, fast = Monitor(look_interval_s=1e9), Monitor(look_interval_s=1e9)
    if config is not None:
        slow.configure(config)
        fast.configure(config)
    for batch in calls:
        assert wire_path(fast, batch, channel) == event_path(slow, batch, channel)
    assert state_of(fast) == state_of(slow)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(runs, st.lists(payloads(), min_size=1, max_size=6))
def test_ingest_payload_counts_and_refuses_as_event_by_event(
    config: dict[str, object] | None, batch: list[bytes]
) -> None:
    slow, fast = Monitor(look_interval_s=1e9), Monitor(look_interval_s=1e9)
    if config is not None:
        slow.configure(config)
        fast.configure(config)
    for position, payload in enumerate(batch):
        where = position if position % 2 else None
        parsed = decode_events(payload, "src", where)
        expected = slow.ingest_parsed(
            parsed,
            source="src",
            positions=range(len(parsed)) if where is None else [where] * len(parsed),
        )
        got = fast.ingest_payload(payload, source="src", position=where)
        assert report_of(got) == report_of(expected)
    assert state_of(fast) == state_of(slow)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.lists(st.integers(-3, 40), min_size=2, max_size=60),
        st.lists(
            st.one_of(st.integers(0, 40), st.integers(4090, 4100)),
            min_size=2,
            max_size=60,
        ),
        st.lists(
            st.one_of(
                st.integers(0, 40), st.integers(1000, 3000), st.integers(65530, 65540)
            ),
            min_size=2,
            max_size=60,
        ),
        st.lists(
            st.one_of(st.integers(0, 9), st.integers(-(2**62), 2**62)),
            min_size=2,
            max_size=60,
        ),
        st.lists(
            st.one_of(st.integers(0, 9), st.integers(2**63 - 3, 2**64)),
            min_size=2,
            max_size=20,
        ),
    ),
    st.randoms(use_true_random=False),
)
def test_integer_ids_are_factorized_as_the_engine_needs(
    numbers: list[int], shuffle: random.Random
) -> None:
    # Narrow spans (a table by value; texts of ids below 65,536 cached, the
    # cache growing as larger ids come), wide ones (a sort), ids past int64.
    trials = numbers[:]
    shuffle.shuffle(trials)
    payload = json.dumps(
        [
            {"run": "r", "model": "a", "question": q, "trial": t, "correct": True}
            for q, t in zip(numbers, trials, strict=True)
        ]
    ).encode()
    (columns,) = decode_payload(payload)
    assert isinstance(columns, TrialColumns)
    assert columns.question == [str(number) for number in numbers]
    assert columns.trial == [str(number) for number in trials]
    assert list(columns.questions) == list(dict.fromkeys(columns.question))
    factors, expected = columns.factors["question"], Factors.of(columns.question)
    assert factors.values == expected.values
    assert factors.codes.tolist() == expected.codes.tolist()
    # Trial ids in 0..4095 are their own codes; others in first-seen order.
    factors = columns.factors["trial"]
    if min(trials) >= 0 and max(trials) < 4096:
        assert factors.codes.tolist() == trials
        assert factors.values == [str(n) for n in range(max(trials) + 1)]
    else:
        expected = Factors.of(columns.trial)
        assert factors.values == expected.values
        assert factors.codes.tolist() == expected.codes.tolist()


def test_an_array_is_read_whole_only_when_every_event_names_its_run() -> None:
    """The run is guessed from the first event's bytes and checked in each."""
    events = [
        {"model": "a", "question": q, "trial": 0, "correct": True, "run": "r"}
        for q in range(3)
    ]
    text = json.dumps(events)
    escaped = text.replace('"run": "r"', '"run": "\\u0072"', 1)
    for payload in (text, escaped):
        (columns,) = decode_payload(payload.encode())
        assert isinstance(columns, TrialColumns) and columns.run == "r"
    # A later event naming another run, or none, is caught by the decoder.
    other = text[::-1].replace('"r" :"nur"', '"s" :"nur"', 1)[::-1]
    none = text[::-1].replace('"r" :"nur" ,', "", 1)[::-1]
    for payload in (other, none):
        assert json.loads(payload)[0]["run"] == "r"
        assert json.loads(payload)[-1].get("run") != "r"
        assert all(
            type(item) is not TrialColumns for item in decode_payload(payload.encode())
        )
        assert [fields(item) for item in flat(decode_payload(payload.encode()))] == [
            fields(item) for item in decode_events(payload.encode(), "")
        ]
    # Under a channel, events may leave the run out; one naming another not.
    (columns,) = decode_payload(none.encode(), run="r")
    assert isinstance(columns, TrialColumns) and len(columns) == 3
    assert all(
        type(item) is not TrialColumns
        for item in decode_payload(other.encode(), run="r")
    )


def test_a_list_of_one_is_counted_as_the_event_alone() -> None:
    event = {"run": "r", "model": "a", "question": 1, "trial": 0, "correct": True}
    alone, listed = Monitor(), Monitor()
    assert alone.ingest(event) == listed.ingest([event])
    bad = {**event, "trial": None}
    assert report_of(alone.ingest(bad)) == report_of(listed.ingest([bad]))


def test_a_refused_row_rejects_alone_and_the_rest_of_its_array_counts() -> None:
    monitor = Monitor()
    monitor.configure({"run": "r", "models": ["a"]})
    batch = [
        {"run": "r", "model": "a", "question": 1, "trial": 0, "correct": True},
        {"run": "r", "model": "x", "question": 1, "trial": 0, "correct": True},
        {"run": "r", "model": "a", "question": 2, "trial": 0, "correct": False},
    ]
    parsed = decode_payload(json.dumps(batch).encode(), "http")
    assert len(parsed) == 1 and isinstance(parsed[0], TrialColumns)
    report = monitor.ingest_payload(json.dumps(batch).encode(), source="http")
    assert report.accepted == 2
    [refused] = report.rejected
    assert isinstance(refused, Rejection)
    assert (refused.kind, refused.position) == ("undeclared", 1)
    assert "model 'x' is not declared" in refused.reason


def test_arrays_in_one_call_share_the_run_question_count() -> None:
    """New questions of one array count against the next array's."""
    monitor = Monitor()
    monitor.configure({"run": "r", "question_count": 3})
    arrays = [
        [
            {"run": "r", "model": "a", "question": q, "trial": 0, "correct": True}
            for q in questions
        ]
        for questions in ([0, 1], [1, 2], [2, 3])
    ]
    parsed = [
        item for array in arrays for item in decode_payload(json.dumps(array).encode())
    ]
    assert all(isinstance(item, TrialColumns) for item in parsed)
    report = monitor.ingest_parsed(parsed, source="mqtt")
    assert (report.accepted, report.duplicates) == (3, 2)
    [refused] = report.rejected
    assert (refused.kind, refused.position) == ("undeclared", 1)
    assert "would be distinct question 4 of question_count=3" in refused.reason


def test_pieces_of_a_payload_refuse_rows_where_the_whole_would() -> None:
    batch = [
        {"run": "r", "model": "a", "question": i, "trial": 0, "correct": True}
        for i in range(25)
    ]
    batch[23]["model"] = "x"
    payload = json.dumps(batch).encode()
    [whole] = decode_payload(payload, "http")
    assert isinstance(whole, TrialColumns)
    pieces = whole.pieces(10)
    assert [len(piece) for piece in pieces] == [10, 10, 5]
    assert [item for piece in pieces for item in piece.expand()] == whole.expand()
    monitor = Monitor()
    monitor.configure({"run": "r", "models": ["a"]})
    reports = [monitor.ingest_parsed([piece], source="http") for piece in pieces]
    assert sum(report.accepted for report in reports) == 24
    [refused] = reports[2].rejected
    assert (refused.kind, refused.position) == ("undeclared", 23)
