"""Every Redis key the shared store uses, as small functions of prefix and run.

Keys are colon-separated under one configurable prefix. A run's keys carry
the run id in braces, a Redis Cluster hash tag, so one run's keys share a
hash slot and a Lua script may touch all of them in one call. Braces and
``%`` inside a run id are percent-escaped in the tag (``a}b`` becomes
``a%7Db``): an unescaped ``}`` would end the tag early, and ``{}`` at its
start would disable it. Global keys (the run index, cursors, dead letters)
have no tag: on Redis Cluster no call names them together with a run's
keys (see :mod:`adapters.redis.store`).

Per run (``{prefix}:{{run}}:...``):

- ``config`` (hash): ``config`` the RunConfig as JSON, ``declared`` ``1`` or
  ``0``, ``width`` its ``C+1``.
- ``trials`` (hash): one field per trial, the JSON array ``[model, question,
  prior, trial]`` (prior 0 or 1), holding its category. The exactly-once
  index.
- ``counts`` (hash): ``[model, question, prior, category]`` -> number of
  trials in that cell (a correction may leave a 0).
- ``totals`` (hash): ``trials``, ``duplicates``, ``corrections``,
  ``rejected``.
- ``costs`` (hash): ``[model, "trials" | "tokens" | "seconds"]`` -> sums over
  new trials that reported a cost.
- ``fired`` (hash): ``[kind, subject]`` -> the event's sequence number.
- ``event_seq`` (string): the run's last event sequence number.
- ``cell_changes`` (stream): the counts' change log, one entry per
  ``version`` (id ``<version>-0``), fields ``w`` (the writing store), ``i``
  (the changed cells by number, comma-separated), ``n`` (their deltas, in
  the same order) and ``c`` (cost deltas as JSON); capped by ``XADD MAXLEN
  ~``. Other workers follow the counts through it instead of re-reading them
  whole (:mod:`adapters.redis.changes`). Workers of the release before wrote
  ``changes`` (entries with ``d``, the deltas as JSON) and read only that
  key: under its own name each side sees the other's versions as a gap and
  reads the counts whole, so workers of both releases may share a run while
  they are upgraded one at a time. A reader meeting a ``d`` entry here
  reads the counts whole too.
- ``cell_numbers`` (hash): ``counts`` field -> its number, and ``cells``
  (list): the ``counts`` fields in number order, from 0. Numbered as the
  log first names them; append-only, like the counts.
- ``status_turn`` (string, expires): set by the worker whose turn it is to
  refresh the run's status (see ``RedisStore.status_turn``).
- ``events`` (stream): fired events, entry id ``<seq>-0``; fields ``kind``,
  ``subject``, ``payload`` (JSON), ``ts``.
- ``history`` (list): look summaries as JSON, oldest first, bounded and
  thinned (:mod:`monitor.stores.history`; appended by ``append_history``).

Global:

- ``{prefix}:runs`` (set): every run id with a config or data.
- ``{prefix}:cursors`` (hash): source name -> committed position.
- ``{prefix}:store`` (string): a random id set by the first worker to open
  the store; a worker that finds it gone or changed knows Redis lost the
  store under it (:mod:`adapters.redis.marker`).
- ``{prefix}:dead_letters`` (stream): rejected inputs; fields ``source``,
  ``reason``, ``raw``, ``received_s`` and, when known, ``run`` and
  ``position``.

TTL policy: nothing here expires. Run data (configs, trials, counts, totals,
costs, fired events) has no TTL on purpose: an acknowledged trial that
expired would be counted again on redelivery, and a fired event that expired
would fire twice. The run index and cursors are as small as the number of
runs and sources, and a lost cursor would replay its source. The one
unbounded log, the dead-letter stream, is capped by ``XADD MAXLEN ~``
instead of a TTL. For the same reason the server must run with
``maxmemory-policy noeviction``.
"""

from __future__ import annotations

from typing import Final

RUN_KEY_NAMES: Final = (
    "config",
    "trials",
    "counts",
    "totals",
    "costs",
    "fired",
    "event_seq",
    "events",
    "cell_changes",
    "cell_numbers",
    "cells",
    "status_turn",
    "history",
)


def check_prefix(prefix: str) -> str:
    """The prefix, if usable: non-empty, without braces (they would be a tag)."""
    if not prefix or "{" in prefix or "}" in prefix:
        raise ValueError(f"prefix must be non-empty and without braces; got {prefix!r}")
    return prefix


def hash_tag(run: str) -> str:
    """The run id with ``%``, ``{`` and ``}`` percent-escaped (reversible)."""
    return run.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def _run_key(prefix: str, run: str, name: str) -> str:
    return f"{prefix}:{{{hash_tag(run)}}}:{name}"


def config(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "config")


def trials(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "trials")


def counts(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "counts")


def totals(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "totals")


def costs(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "costs")


def fired(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "fired")


def event_seq(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "event_seq")


def events(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "events")


def changes(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "cell_changes")


def cell_numbers(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "cell_numbers")


def cells(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "cells")


def history(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "history")


def status_turn(prefix: str, run: str) -> str:
    return _run_key(prefix, run, "status_turn")


def run_keys(prefix: str, run: str) -> list[str]:
    """Every key of one run (they share one cluster hash slot)."""
    return [_run_key(prefix, run, name) for name in RUN_KEY_NAMES]


def runs(prefix: str) -> str:
    return f"{prefix}:runs"


def cursors(prefix: str) -> str:
    return f"{prefix}:cursors"


def store_marker(prefix: str) -> str:
    return f"{prefix}:store"


def trial_stream(prefix: str, run: str) -> str:
    """Stream producers ``XADD`` a run's trials to (read by a consumer group)."""
    return _run_key(prefix, run, "trials")


def trial_stream_pattern(prefix: str) -> str:
    """``SCAN`` pattern matching every run's trial stream."""
    return f"{prefix}:{{*}}:trials"


def run_of_trial_stream(key: str) -> str:
    """The run id in a trial stream key (the hash tag, unescaped)."""
    tag = key[key.index("{") + 1 : key.rindex("}")]
    return tag.replace("%7D", "}").replace("%7B", "{").replace("%25", "%")


def poison_trials(prefix: str) -> str:
    """Stream of trial-stream entries that failed too often (capped)."""
    return f"{prefix}:deadletter:trials"


def dead_letters(prefix: str) -> str:
    return f"{prefix}:dead_letters"
