"""The trial event's own checks: field_problem says why msgspec refused an event.

msgspec's struct is the contract; :func:`field_problem` words its per-field
rules in our terms. The oracle: on any input, from Python objects or from
JSON bytes, msgspec refuses exactly when field_problem names a problem, so
a refusal never falls back to a library's wording.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.limits import MAX_ID_LENGTH, MAX_SIGNALS
from monitor.trial_event import TrialEvent, field_problem, shown

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=4)
    | st.sampled_from(["", "x" * MAX_ID_LENGTH, "x" * (MAX_ID_LENGTH + 1), "\ud800"])
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(), inner),
    max_leaves=4,
)
_signal_names = (
    st.from_regex(r"[a-z][a-z0-9_]{0,3}", fullmatch=True)
    | st.text(max_size=3)
    | st.sampled_from(["a\n", "a" * 64, "a" * 65, "Ab"])
)
_signals = st.dictionaries(_signal_names, _values, max_size=3) | st.dictionaries(
    st.from_regex(r"s[0-9]{1,2}", fullmatch=True),
    st.integers(0, 1),
    min_size=MAX_SIGNALS - 1,
    max_size=MAX_SIGNALS + 2,
)
_costs = st.fixed_dictionaries(
    {}, optional={"tokens": _scalars, "seconds": _scalars, "dollars": _scalars}
)
_events = st.fixed_dictionaries(
    {},
    optional={
        "run": _scalars,
        "model": _scalars,
        "question": _scalars,
        "trial": _scalars,
        "category": _scalars,
        "correct": _scalars,
        "prior": _scalars,
        "cost": _costs | _values,
        "ts": _scalars,
        "signals": _signals | _values,
        "cots": _scalars,
        1: _scalars,
    },
)


def msgspec_refuses(value: object) -> bool:
    try:
        msgspec.convert(value, TrialEvent)
    except (msgspec.ValidationError, UnicodeEncodeError):  # as the decoder
        return True
    return False


@given(_events)
def test_msgspec_refuses_an_event_from_python_exactly_when_field_problem_says_why(
    value: dict[str, object],
) -> None:
    assert msgspec_refuses(value) == (field_problem(value) is not None)


@given(_events)
def test_msgspec_refuses_an_event_as_json_exactly_when_field_problem_says_why(
    value: dict[str, object],
) -> None:
    try:
        data = json.dumps(value, allow_nan=False, ensure_ascii=False).encode()
    except (ValueError, UnicodeEncodeError):  # NaN, a lone surrogate: not JSON
        return
    try:
        msgspec.json.decode(data, type=TrialEvent)
    except msgspec.ValidationError:
        refused = True
    else:
        refused = False
    assert refused == (field_problem(json.loads(data)) is not None)


EVENT: Mapping[str, object] = {"model": "m", "question": 1, "trial": 0}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"category": "1"}, 'category: must be an integer >= 0; got "1"'),
        ({"category": True}, "category: must be an integer >= 0; got true"),
        (
            {"cost": {"seconds": math.nan}},
            "cost.seconds: must be a finite number >= 0; got NaN",
        ),
        ({"cost": {7: 1}}, "cost: a field name must be a string; got 7"),
        ({"signals": []}, "signals: must be an object of at most 32 signals; got []"),
        ({"x" * 50: 1}, 'unknown field "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'),
    ],
)
def test_each_field_problem_is_worded_as_field_must_be_got_value(
    change: dict[str, object], problem: str
) -> None:
    assert field_problem({**EVENT, **change}) == problem


def test_the_first_field_in_the_event_order_is_named_then_a_missing_one() -> None:
    value = {"trial": 1.5, "model": 3}
    assert field_problem(value) == (
        "trial: must be an integer or 1 to 256 characters of text without "
        "control characters; got 1.5"
    )
    assert field_problem({"trial": 0, "model": "m"}) == "question: missing field"
    assert field_problem(EVENT) is None
    assert field_problem({2: 1}) == "a field name must be a string; got 2"  # type: ignore[dict-item]


def test_problem_shows_an_integer_id_too_long_without_formatting_it() -> None:
    event = msgspec.convert({**EVENT, "trial": 10**5000, "category": 1}, TrialEvent)
    assert event.problem() == (
        "trial: must be an integer or 1 to 256 characters of text without "
        "control characters; got an integer too long to show"
    )
    assert shown(10**300).endswith("...")


def test_model_validate_raises_our_wording() -> None:
    with pytest.raises(
        ValueError, match=r"^category: must be an integer >= 0; got -1$"
    ):
        TrialEvent.model_validate({**EVENT, "run": "r", "category": -1})
    with pytest.raises(
        ValueError, match=r"^a trial event must be an object; got list$"
    ):
        TrialEvent.model_validate([1])
