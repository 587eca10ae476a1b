"""The Lua scripts: loaded once at connect, queued with their keys and ARGV.

Each script is its own ``lua/*.lua`` file whose header lists KEYS and ARGV.
``apply_trials`` classifies and counts a chunk of trials atomically (at most
``chunk_size`` trials a call, so one call never blocks Redis for long);
``fire_events`` fires each event once; ``read_cells`` reads numbered counts
cells for a worker following the change log. The worker sends each trial's
fields ready-made (:func:`_trial_arguments`), so Redis builds no text per
trial, and refuses a malformed batch before anything is sent
(:func:`check_trials`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from importlib import resources
from typing import Final

import numpy as np
import redis
from numpy.typing import NDArray
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.typing import EncodableT

from adapters.redis import keys
from adapters.redis.changes import Versions, integers
from adapters.redis.records import Pipe, Reply, as_text
from monitor.errors import StoreError
from monitor.stores.batches import Previous, TrialBatch
from monitor.stores.ledger import NEW
from monitor.stores.records import PendingEvent

CHUNK_SIZE: Final = 2000
# How many quoted ids and row texts a store keeps before it starts over.
QUOTED_LIMIT: Final = 100_000


class Scripts:
    """The store's scripts on one client, and the calls that queue them.

    Args:
        client: The store's client (one Redis or a cluster).
        prefix: The store's key prefix.
        writer: The store's mark in the change log.
        chunk_size: Trials per ``apply_trials`` call.
    """

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        prefix: str,
        writer: str,
        chunk_size: int = CHUNK_SIZE,
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._writer = writer
        self._chunk_size = chunk_size
        # Ids as JSON strings, and rows as the text their fields start with,
        # kept across batches (a run's ids recur in every batch); emptied
        # past QUOTED_LIMIT entries.
        self._quoted: dict[str, str] = {}
        self._heads: dict[tuple[str, str, bool], str] = {}
        self._apply_trials_script = self._register("apply_trials.lua")
        self._fire_events_script = self._register("fire_events.lua")
        self._read_cells_script = self._register("read_cells.lua")
        self._append_history_script = self._register("append_history.lua")

    def append_history(self, run: str, point: str, trials: int, limit: int) -> None:
        """Keep a look's summary (see ``lua/append_history.lua``)."""
        self._append_history_script(
            keys=[keys.history(self._prefix, run)], args=[point, trials, limit]
        )

    def chunks(self, count: int) -> int:
        """How many ``apply_trials`` calls a batch of ``count`` trials takes."""
        return -(-count // self._chunk_size)

    def queue_apply(self, pipe: Pipe, trials: TrialBatch) -> None:
        """Queue the batch's ``apply_trials`` calls, one per chunk, in order."""
        for start in range(0, len(trials), self._chunk_size):
            stop = min(start + self._chunk_size, len(trials))
            self._apply_trials(pipe, trials.run, self._arguments(trials, start, stop))

    def previous(
        self, run: str, replies: Sequence[Reply], count: int, versions: Versions
    ) -> Previous:
        """Previous categories from the ``apply_trials`` replies of one batch."""
        sizes = [
            min(self._chunk_size, count - start)
            for start in range(0, count, self._chunk_size)
        ]
        answers: list[NDArray[np.int64]] = []
        for reply, size in zip(replies, sizes, strict=True):
            version, _, categories = as_text(reply).partition("|")
            if not version.startswith("="):
                # A chunk that changed no count made no version: the one it
                # answers may be another worker's, not yet read.
                versions.note(run, int(version))
            # One NumPy parse per chunk, not an int() per trial.
            answer = np.full(size, NEW) if categories == "new" else integers(categories)
            if answer.size != size:
                raise StoreError(
                    f"apply_trials answered {answer.size} of {size} trials"
                )
            answers.append(answer)
        return np.concatenate(answers) if answers else np.zeros(0, np.int64)

    def queue_fire(self, pipe: Pipe, run: str, events: Sequence[PendingEvent]) -> None:
        """Queue ``fire_events`` for one run's events."""
        arguments: list[str] = []
        for event in events:
            arguments += [
                json.dumps([event.kind, event.subject]),
                event.kind,
                event.subject,
                json.dumps(event.payload),
                repr(float(event.ts)),
            ]
        self._run(
            self._fire_events_script,
            pipe,
            [
                keys.fired(self._prefix, run),
                keys.event_seq(self._prefix, run),
                keys.events(self._prefix, run),
            ],
            arguments,
        )

    def read_cells(self, run: str, first: int, last: int) -> str:
        """The fields of the run's counts cells numbered ``first..last``."""
        pipe = self._client.pipeline(transaction=False)
        self._run(
            self._read_cells_script,
            pipe,
            [keys.cells(self._prefix, run)],
            [first, last],
        )
        return as_text(pipe.execute()[0])

    def _register(self, name: str) -> Script:
        text = resources.files("adapters.redis").joinpath("lua", name).read_text()
        # Every call sends the text: without its comment lines it is 36-57%
        # smaller.
        text = "\n".join(
            line for line in text.splitlines() if not line.lstrip().startswith("--")
        )
        script = self._client.register_script(text)
        # Loading at connect fails fast on a bad script or an unreachable
        # server (on a cluster it loads on every master).
        self._client.script_load(text)
        return script

    def _run(
        self,
        script: Script,
        pipe: Pipe,
        run_keys: list[str],
        arguments: Sequence[EncodableT],
    ) -> None:
        # EVAL with the text, not EVALSHA: inside MULTI a NOSCRIPT (after a
        # restart, or on a promoted replica) would fail one call of the
        # batch, and redis-py's guard against it (SCRIPT EXISTS before every
        # pipeline) costs a round trip per apply. Redis still compiles the
        # script once and finds it by the text's SHA1 after that.
        # (ClusterPipeline blocks its eval method, not the command; its
        # execute_command has no annotations.)
        pipe.execute_command(  # type: ignore[no-untyped-call]
            "EVAL", script.script, len(run_keys), *run_keys, *arguments
        )

    def _arguments(self, trials: TrialBatch, start: int, stop: int) -> list[str | int]:
        if len(self._quoted) + len(self._heads) > QUOTED_LIMIT:
            self._quoted.clear()
            self._heads.clear()
        return _trial_arguments(
            trials, start, stop, self._quoted, self._heads, self._writer
        )

    def _apply_trials(self, pipe: Pipe, run: str, arguments: list[str | int]) -> None:
        self._run(
            self._apply_trials_script,
            pipe,
            [
                keys.trials(self._prefix, run),
                keys.counts(self._prefix, run),
                keys.totals(self._prefix, run),
                keys.costs(self._prefix, run),
                keys.changes(self._prefix, run),
                keys.cell_numbers(self._prefix, run),
                keys.cells(self._prefix, run),
            ],
            arguments,
        )


def check_trials(trials: TrialBatch) -> None:
    """Refuse a malformed batch before anything is sent (no half-applied EXEC)."""
    columns = (trials.model, trials.question, trials.trial, trials.prior)
    if any(len(c) != len(trials) for c in (*columns, trials.tokens, trials.seconds)):
        raise ValueError(
            f"trial batch of run {trials.run!r} has columns of unequal length"
        )
    # Plain ints and Nones pass in C loops; anything else item by item.
    categories = trials.category
    if not (set(map(type, categories)) <= {int} and min(categories, default=0) >= 0):
        for category in categories:
            if (
                not isinstance(category, int)
                or isinstance(category, bool)
                or category < 0
            ):
                raise ValueError(f"category must be an integer >= 0; got {category!r}")
    if not set(map(type, trials.tokens)) <= {int, type(None)}:
        for tokens in trials.tokens:
            if tokens is not None and (
                not isinstance(tokens, int) or isinstance(tokens, bool)
            ):
                raise ValueError(f"tokens must be an integer or None; got {tokens!r}")
    if trials.seconds.count(None) < len(trials.seconds):
        for seconds in trials.seconds:
            if seconds is not None and not math.isfinite(seconds):
                raise ValueError(f"seconds must be finite or None; got {seconds!r}")


def _trial_arguments(
    trials: TrialBatch,
    start: int,
    stop: int,
    quoted: dict[str, str],
    heads: dict[tuple[str, str, bool], str],
    writer: str,
) -> list[str | int]:
    """ARGV of ``apply_trials.lua`` for trials ``start:stop`` of the batch.

    Each trial's trials field and counts cell as Redis stores them, so the
    script builds no text per trial (Redis's time, shared by every worker),
    and ids quoted once (``quoted`` caches their JSON, ``heads`` each row's
    text up to the trial or category).
    """

    def quote(text: str) -> str:
        found = quoted.get(text)
        if found is None:
            found = quoted[text] = json.dumps(text)
        return found

    fields: list[str] = []
    cells: list[str] = []
    categories: list[str] = []
    rows = zip(
        trials.model[start:stop],
        trials.question[start:stop],
        trials.prior[start:stop],
        strict=True,
    )
    for row, trial, category in zip(
        rows, trials.trial[start:stop], trials.category[start:stop], strict=True
    ):
        head = heads.get(row)
        if head is None:
            head = heads[row] = f"[{quote(row[0])},{quote(row[1])},{int(row[2])},"
        fields.append(f"{head}{quoted.get(trial) or quote(trial)}]")
        text = str(category)
        categories.append(text)
        cells.append(f"{head}{text}]")
    costs: list[str | int] = []
    tokens, seconds = trials.tokens[start:stop], trials.seconds[start:stop]
    if tokens.count(None) + seconds.count(None) < 2 * (stop - start):
        reported = zip(tokens, seconds, strict=True)
        for number, (spent, took) in enumerate(reported, start=1):
            if spent is not None or took is not None:
                costs += [
                    number,
                    quote(trials.model[start + number - 1]),
                    "" if spent is None else spent,
                    "" if took is None else repr(float(took)),
                ]
    # Most chunks name each trial once: the script then keeps no table of
    # the categories it has set.
    repeats = len(set(fields)) < len(fields)
    return [
        stop - start,
        int(repeats),
        writer,
        *fields,
        *cells,
        *categories,
        *costs,
    ]
