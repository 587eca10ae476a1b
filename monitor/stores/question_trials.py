"""One question's trials, as each store keeps them: the dashboard's drill-down.

What a store keeps of a trial decides what the drill-down can show:

- memory: the exactly-once index (:mod:`monitor.stores.ledger`): model,
  trial id, prior or observed, category. Costs are summed per model and
  times are not kept, so those read as None.
- SQLite: the trial log, every new or corrected delivery with its cost
  (tokens, seconds) and timestamp; the last delivery of a trial is its
  category, as a restart's replay counts it. The log is kept per ingest
  call, not per question, so a read scans the run's log (only the model and
  question columns of each call; a call holding the question is decoded
  whole): about linear in the run's trials (``benchmarks/question_trials.py``).
- Redis (``adapters.redis``): the ``trials`` hash, one field per trial
  (model, question, prior, trial id) holding its category, scanned with a
  ``MATCH`` on the question; costs are summed per model, times not kept.

A store that keeps no per-trial record answers :data:`NOT_KEPT`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Final, Protocol, runtime_checkable

import msgspec

from monitor.stores.sqlite_schema import LoggedTrials

KEPT_BY_MEMORY: Final = "category (no per-trial cost or time in memory)"
KEPT_BY_SQLITE: Final = "category, cost and time of each trial (the trial log)"
NOT_KEPT: Final = "this store keeps no per-trial record"


class QuestionTrial(msgspec.Struct, frozen=True):
    """One trial of a question: its category and, where kept, cost and time."""

    model: str
    trial: str
    prior: bool
    category: int
    tokens: int | None = None
    seconds: float | None = None
    ts: float | None = None


class QuestionTrials(msgspec.Struct, frozen=True):
    """The trials of a question, and what the store keeps of each."""

    trials: list[QuestionTrial]
    kept: str


@runtime_checkable
class QuestionTrialReader(Protocol):
    """A store that can list one question's trials."""

    def question_trials(self, run: str, question: str) -> QuestionTrials: ...


def read_question_trials(store: object, run: str, question: str) -> QuestionTrials:
    """``store.question_trials`` where it has one, else none and why."""
    if isinstance(store, QuestionTrialReader):
        return store.question_trials(run, question)
    return QuestionTrials([], NOT_KEPT)


def from_index(rows: Iterable[tuple[str, bool, str, int]]) -> QuestionTrials:
    """Trials from an exactly-once index's (model, prior, trial, category)."""
    trials = [QuestionTrial(m, t, p, c) for m, p, t, c in rows]
    return QuestionTrials(trials, KEPT_BY_MEMORY)


class _Head(msgspec.Struct, array_like=True):
    """The question column of a ``trial_batches`` row (the rest skipped)."""

    model: msgspec.Raw  # left as bytes, not decoded
    question: list[str]


_head = msgspec.msgpack.Decoder(_Head).decode
_row = msgspec.msgpack.Decoder(LoggedTrials).decode


def from_sqlite(db: sqlite3.Connection, run: str, question: str) -> QuestionTrials:
    """The question's trials from a state file's trial log, last delivery first
    kept per trial (files of every schema version: ``trial_log`` rows, then
    ``trial_batches``)."""
    found: dict[tuple[str, bool, str], QuestionTrial] = {}
    tables = {
        name
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    for log in ("trials", "trial_log"):
        if log not in tables:
            continue
        rows = db.execute(
            f"SELECT model, trial, prior, category, tokens, seconds, ts FROM {log} "
            "WHERE run = ? AND question = ?"
            + (" ORDER BY rowid" if log == "trial_log" else ""),
            (run, question),
        )
        for model, trial, prior, category, tokens, seconds, ts in rows:
            found[(model, bool(prior), trial)] = QuestionTrial(
                model, trial, bool(prior), category, tokens, seconds, ts
            )
    if "trial_batches" in tables:
        rows = db.execute(
            "SELECT trials FROM trial_batches WHERE run = ? ORDER BY rowid", (run,)
        )
        for (body,) in rows:
            if question not in _head(body).question:
                continue
            logged = _row(body)
            for index, asked in enumerate(logged.question):
                if asked != question:
                    continue
                trial = QuestionTrial(
                    logged.model[index],
                    logged.trial[index],
                    logged.prior[index],
                    logged.category[index],
                    logged.tokens[index] if logged.tokens else None,
                    logged.seconds[index] if logged.seconds else None,
                    logged.ts[index] if logged.ts else None,
                )
                found[(trial.model, trial.prior, trial.trial)] = trial
    return QuestionTrials(list(found.values()), KEPT_BY_SQLITE)
