"""Limits and defaults shared across the monitor, in one place.

Each bound guards memory, time or the stack against input from outside;
changing one changes what the contract accepts (see the docs on the trial
event and the HTTP API).
"""

from __future__ import annotations

from typing import Final

# schema
MAX_ID_LENGTH: Final = 256
# A benchmark larger than this is a typo or an attack: each question costs
# memory in every model's count table.
MAX_QUESTION_COUNT: Final = 1_000_000
MAX_SIGNALS: Final = 32


# inputs
MAX_PAYLOAD_BYTES: Final = 1 << 20
MAX_RAW_KEPT: Final = 4096
# Events in one payload: a larger array is refused whole, so one request
# cannot make the engine classify (or dead-letter) without bound.
MAX_BATCH_ITEMS: Final = 10_000
# A trial event nests three levels at most (batch, event, cost or signals);
# deeper input is refused before anything walks it recursively.
MAX_DEPTH: Final = 16
# Brackets a payload may open before it is refused undecoded. json.loads
# recurses per level, so without this bound whether ~1,000 levels parse
# (and so which reason a refusal gives) would depend on the caller's stack.
MAX_PARSE_DEPTH: Final = 256


# engine
# Without declared runs any run name creates state; past this many such runs
# a new name is refused (unknown_run), so a stream of names cannot grow the
# state (and every scrape of /metrics) without bound.
MAX_UNDECLARED_RUNS: Final = 1000
# Forecast ends kept per run before the memo starts over (a few per pair).
FORECAST_MEMO_SIZE: Final = 4096
# How long a plan's reservations last unless reported (see Monitor.next).
DEFAULT_LEASE_S: Final = 600.0
# ingest_columns counts a call in chunks of this many trials: one chunk's
# per-trial temporaries (lists and index arrays, a few hundred bytes a
# trial) bound the call's peak memory, however long the columns are.
COLUMN_CHUNK_TRIALS: Final = 1 << 17


# stores
# Dead-letter retention (memory and SQLite stores): the newest this many,
# none older than this. Rejections still count in the run totals.
DEAD_LETTERS_MAX: Final = 100_000
DEAD_LETTERS_MAX_AGE_S: Final = 7 * 24 * 3600.0


# http
# Event numbers are SQLite integers (and Redis counters): at most 2**63 - 1.
MAX_EVENT_NUMBER: Final = (1 << 63) - 1
# Bounds on what one request may ask: a plan's budget (planning costs time
# on the engine thread in proportion) and the rejections an answer lists.
MAX_NEXT_BUDGET: Final = 1_000
# The longest reservation a plan may ask for: a day. A lease that outlives
# the trials it stands for keeps them from every other scheduler.
MAX_LEASE_S: Final = 86_400.0
MAX_REPORTED_REJECTIONS: Final = 100
# Dead letters a client without a token may cause by naming runs the monitor
# refuses (unknown_run), in bytes of request body plus a row's overhead per
# rejected event: this much at once, refilled at this rate; past it such a
# request is a 429 and records nothing. Clients tracked at most.
UNKNOWN_RUN_BYTES_BURST: Final = 1 << 20
UNKNOWN_RUN_BYTES_PER_S: Final = (1 << 20) / 3600
UNKNOWN_RUN_ROW_BYTES: Final = 256
UNKNOWN_RUN_CLIENTS: Final = 10_000
