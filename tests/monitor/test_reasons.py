"""Why an input is refused, in our words: read_json's own checks, and
run config errors worded from pydantic's error types.

The decoder refuses bytes msgspec cannot read; :func:`read_json` says why
(invalid UTF-8 and where, the line and column where the JSON stops, NaN,
lone surrogates, numbers beyond a double), whatever msgspec's version says.
The oracle: read_json refuses exactly the bytes msgspec refuses.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from monitor.inputs.reasons import (
    NotJson,
    describe_validation_error,
    json_reason,
    read_json,
)
from monitor.schema import RunConfig

# Pieces of JSON and of what is not JSON, joined at random.
_pieces = st.sampled_from(
    [
        b"{",
        b"}",
        b"[",
        b"]",
        b'"',
        b",",
        b":",
        b"1",
        b"-",
        b".",
        b"e",
        b"0",
        b"null",
        b"true",
        b"NaN",
        b"Infinity",
        b"1e400",
        b"\\",
        b"\\u",
        b"d800",
        b"dc00",
        b"\\n",
        b"\xff",
        b"\xc3",
        b"\xc3\xa9",
        b"\xef\xbb\xbf",
        b" ",
        b"\n",
        b"\x01",
        b"a",
    ]
)
_payloads = st.lists(_pieces, max_size=12).map(b"".join) | st.binary(max_size=12)


def msgspec_reads(data: bytes) -> bool:
    try:
        msgspec.json.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False
    return True


@given(_payloads)
@example(b'"\\ud800"')
@example(b'["\\udc00\\ud800"]')
@example(b'{"a": 1e400}')
def test_read_json_refuses_exactly_what_msgspec_refuses(data: bytes) -> None:
    if msgspec_reads(data):
        assert read_json(data) == msgspec.json.decode(data)
    else:
        with pytest.raises(NotJson):
            read_json(data)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"trial":', "unexpected end at line 1 column 10"),
        (b'{"trial":\n', "unexpected end at line 1 column 10"),
        (b'{"a": 1,\n "b": }', "unexpected '}' at line 2 column 7"),
        (b'{"a": 1 "b": 2}', "unexpected '\"' at line 1 column 9"),
        (b"{} x", "unexpected 'x' at line 1 column 4"),
        (b'{"a": "abc', "a string that never ends, starting at line 1 column 7"),
        (b'{"a": "b\\qc"}', "invalid escape \\q at line 1 column 9"),
        (b'{"a": "b\\u12"}', "invalid escape \\u12 at line 1 column 9"),
        (b'{"a": "b\nc"}', "unexpected character U+000A at line 1 column 9"),
        (b"\xef\xbb\xbf{}", "unexpected character U+FEFF at line 1 column 1"),
        (b"", "unexpected end at line 1 column 1"),
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b"[-Infinity]", "-Infinity is not a JSON number"),
        (b'{"a": 1e400}', "the number 1e400 is out of range"),
        (b"1" * 5000, "a number out of range"),
        (b'{"a": "x\\ud800"}', 'a lone surrogate escape in the string "x\\ud800"'),
        (b'{"\\udc00": 1}', 'a lone surrogate escape in the string "\\udc00"'),
        (b'{"model": "m\xff"}', 'invalid UTF-8 in the string "m\\xff"'),
        (b'{"mo\xffdel": 1}', 'invalid UTF-8 in the string "mo\\xffdel"'),
        (b'["ok", "\xc3"]', 'invalid UTF-8 in the string "\\xc3"'),
        (b'{"a": "\xc0\xaf', 'invalid UTF-8 in the string "\\xc0\\xaf"'),
        (b"\xff", "invalid UTF-8 at line 1 column 1"),
        (b'{"a": 1,\n  \xff}', "invalid UTF-8 at line 2 column 3"),
    ],
)
def test_each_reason_says_what_and_where(data: bytes, reason: str) -> None:
    with pytest.raises(NotJson) as refused:
        read_json(data)
    assert str(refused.value) == reason
    assert json_reason(data) == reason


def test_invalid_utf8_in_a_long_string_is_quoted_around_its_byte() -> None:
    data = b'{"model": "' + b"a" * 100 + b"\xff" + b"b" * 100 + b'"}'
    assert json_reason(data) == (
        'invalid UTF-8 in the string "...' + "a" * 40 + "\\xff" + "b" * 19 + '..."'
    )


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({}, "run: missing field"),
        ({"run": 5}, "run: must be a string; got 5"),
        ({"run": "r", "weights": [1]}, "weights: must have at least 2 items; got [1]"),
        (
            {"run": "r", "question_count": "3"},
            'question_count: must be an integer; got "3"',
        ),
        ({"run": "r", "question_count": 0}, "question_count: must be >= 1; got 0"),
        ({"run": "r", "confidence": 2}, "confidence: must be < 1.0; got 2"),
        ({"run": "r", "rule": "x"}, "rule: must be 'sequential' or 'paper'; got \"x\""),
        (
            {"run": "r", "webhooks": ["ftp://x"]},
            'webhooks: must be text matching ^https?://; got "ftp://x"',
        ),
        (
            {"run": "r", "thresholds": {"a": "b"}},
            'thresholds.a: must be a number; got "b"',
        ),
        (
            {"run": "r", "labels": "x", "extra": 2},
            'labels: must be a list; got "x"; unknown field "extra"',
        ),
        ({"run": "r", "models": ["a", "a"]}, "models must be distinct"),
    ],
)
def test_a_run_config_error_is_worded_as_field_must_got_value(
    config: dict[str, object], reason: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        RunConfig.model_validate(config)
    assert describe_validation_error(refused.value) == reason
