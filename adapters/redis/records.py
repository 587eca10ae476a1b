"""Monitor records in Redis: read back from replies, dead letters written.

Replies are text or bytes depending on the client's ``decode_responses``;
the readers here take either. :func:`translated` is the one place
redis-py's exceptions become :class:`~monitor.errors.StoreError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Final

from redis.client import Pipeline
from redis.cluster import ClusterPipeline
from redis.exceptions import OutOfMemoryError, RedisClusterException, RedisError
from redis.typing import EncodableT, FieldT

from adapters.redis import keys
from monitor.errors import StoreError
from monitor.stores.records import (
    DeadLetter,
    JsonValue,
    ModelCounts,
    PendingEvent,
    RunTotals,
    StoredEvent,
)

# A reply is text or bytes depending on the client's decode_responses.
Reply = str | bytes
ReplyMap = Mapping[Reply, Reply]
# What commands are queued on: a transaction or a plain pipeline.
Pipe = Pipeline | ClusterPipeline


@contextmanager
def translated(action: str) -> Iterator[None]:
    """The one place redis-py's exceptions become StoreError."""
    try:
        yield
    except (RedisError, RedisClusterException) as exc:
        raise StoreError(f"redis store cannot {action}: {reason(exc)}") from exc


# redis-py words a failed command of a pipeline "Command # 3 (EVAL <the
# script's text> ...) of pipeline caused error: <Redis's reply>".
_PIPELINE_PREFIX: Final = re.compile(
    r"Command # \d+ \(.*\) of pipeline caused error: ", re.S
)


def reason(error: BaseException) -> str:
    """Why a Redis call failed, in one line: Redis's own reply without the
    command that got it (a script's whole text), plus what to do when Redis
    is full."""
    text = " ".join(_PIPELINE_PREFIX.sub("", str(error)).split())
    if isinstance(error, OutOfMemoryError) or "> 'maxmemory'" in text:
        text += (
            " (Redis is at its maxmemory with a noeviction policy: nothing is "
            "written until it has room; raise maxmemory or free memory)"
        )
    return text


def model_counts(
    width: int, counts: ReplyMap, costs: ReplyMap
) -> dict[str, ModelCounts]:
    """ModelCounts per model from the run's counts and costs hashes."""
    fields = [as_text(field) for field in counts]
    cells = json.loads("[" + ",".join(fields) + "]") if fields else []
    tables: dict[str, dict[str, list[list[int]]]] = {}
    for (model, question, prior, category), value in zip(
        cells, counts.values(), strict=True
    ):
        rows = tables.setdefault(model, {}).get(question)
        if rows is None:
            rows = tables[model][question] = [[0] * width, [0] * width]
        if category >= width:
            raise StoreError(
                f"stored category {category} is outside 0..{width - 1} of the run"
            )
        rows[prior][category] += int(value)
    spent: dict[tuple[str, str], str] = {}
    for field, value in costs.items():
        model, measure = json.loads(as_text(field))
        spent[(model, measure)] = as_text(value)
    result = {}
    for model in sorted(tables):
        questions = sorted(tables[model])
        result[model] = ModelCounts(
            questions=questions,
            observed=[tables[model][question][0] for question in questions],
            prior=[tables[model][question][1] for question in questions],
            costed_trials=int(spent.get((model, "trials"), 0)),
            tokens=int(spent.get((model, "tokens"), 0)),
            seconds=float(spent.get((model, "seconds"), 0.0)),
        )
    return result


def stored_events(
    events: Sequence[PendingEvent], seqs: Sequence[int | str]
) -> list[StoredEvent]:
    """The events ``fire_events.lua`` numbered (a 0 means it fired before)."""
    return [
        StoredEvent(
            seq=int(seq),
            run=event.run,
            kind=event.kind,
            subject=event.subject,
            payload=event.payload,
            ts=event.ts,
        )
        for event, seq in zip(events, seqs, strict=True)
        if int(seq)
    ]


def entry_version(entry_id: Reply) -> int:
    return int(as_text(entry_id).split("-")[0])


def run_totals(values: ReplyMap) -> RunTotals:
    stored = as_texts(values)
    return RunTotals(
        trials=int(stored.get("trials", 0)),
        duplicates=int(stored.get("duplicates", 0)),
        corrections=int(stored.get("corrections", 0)),
        rejected=int(stored.get("rejected", 0)),
    )


def stored_event(run: str, entry_id: Reply, fields: ReplyMap) -> StoredEvent:
    stored = as_texts(fields)
    payload: dict[str, JsonValue] = json.loads(stored["payload"])
    return StoredEvent(
        seq=int(as_text(entry_id).split("-")[0]),
        run=run,
        kind=stored["kind"],
        subject=stored["subject"],
        payload=payload,
        ts=float(stored["ts"]),
    )


def dead_letter(fields: ReplyMap) -> DeadLetter:
    stored = as_texts(fields)
    position = stored.get("position")
    return DeadLetter(
        source=stored["source"],
        reason=stored["reason"],
        raw=stored["raw"],
        run=stored.get("run"),
        position=None if position is None else int(position),
        received_s=float(stored["received_s"]),
    )


def as_text(value: Reply) -> str:
    """A reply as text, whether the client decodes responses or not."""
    return value if isinstance(value, str) else value.decode("utf-8", "surrogatepass")


def as_texts(values: ReplyMap) -> dict[str, str]:
    return {as_text(key): as_text(value) for key, value in values.items()}


def queue_dead_letter(
    pipe: Pipe,
    prefix: str,
    letter: DeadLetter,
    limit: int,
    count_run: bool = True,
) -> None:
    """Queue the letter's XADD (about ``limit`` kept) and, with ``count_run``,
    its run's count."""
    fields: dict[FieldT, EncodableT] = {
        "source": letter.source,
        "reason": letter.reason,
        "raw": letter.raw,
        "received_s": repr(float(letter.received_s)),
    }
    if letter.position is not None:
        fields["position"] = letter.position
    if letter.run is not None:
        fields["run"] = letter.run
        if count_run:
            pipe.hincrby(keys.totals(prefix, letter.run), "rejected", 1)
            pipe.sadd(keys.runs(prefix), letter.run)
    pipe.xadd(
        keys.dead_letters(prefix),
        fields,
        maxlen=limit,
        approximate=True,
    )
