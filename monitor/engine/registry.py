"""The run registry: which runs exist, their declarations and live state.

A run is declared (``configure``) or, when no run is declared, created by
the first event naming it, up to ``max_undeclared_runs``. The registry
rebuilds every run's :class:`RunState` from the store on start and checks
a new declaration against what the run already counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Final

from pydantic import ValidationError

from monitor.engine.runs import RunState
from monitor.errors import ConfigError, UnknownRunError
from monitor.inputs.reasons import describe_validation_error
from monitor.interfaces import Store
from monitor.schema import RunConfig
from monitor.stores.records import ModelCounts, StoredState


class Registry:
    """Every run's :class:`RunState`, by run id.

    Args:
        store: Where configs are saved and counts read from.
        max_undeclared_runs: With no declared run, how many runs events may
            create by naming them; later names are refused.
    """

    def __init__(self, store: Store, max_undeclared_runs: int) -> None:
        self._store = store
        self._max_undeclared_runs = max_undeclared_runs
        self._runs: dict[str, RunState] = {}
        # The run's state, or None for a run not known: the dict's own
        # bound method, as ingestion asks once per trial.
        self.get: Callable[[str], RunState | None] = self._runs.get

    def __contains__(self, run: object) -> bool:
        return run in self._runs

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    @property
    def names(self) -> list[str]:
        """Run ids, sorted."""
        return sorted(self._runs)

    def run(self, run: str) -> RunState:
        """The run's state.

        Raises:
            UnknownRunError: for a run not known.
        """
        state = self._runs.get(run)
        if state is None:
            raise UnknownRunError(run)
        return state

    def configure(self, config: RunConfig | Mapping[str, object]) -> RunConfig:
        """Declare a run (or update it while counted trials keep their meaning).

        Raises:
            ConfigError: for an invalid config, or a change that counted
                trials cannot take: other weights, another stopping rule
                setting (confidence, cap, target, ...) or question set.
        """
        if not isinstance(config, RunConfig):
            config = _validated_config(config)
        existing = self._runs.get(config.run)
        counts = self._store.counts(config.run)
        if existing is not None and any(map(_has_trials, counts.values())):
            _check_scoring_unchanged(existing.config, config)
            _check_questions_unchanged(existing, config, counts)
            _check_stopping_unchanged(existing.config, config)
        # Built before anything is saved: a config the counted state cannot
        # live with is refused whole, and the stored one stays.
        state = RunState(config, declared=True)
        try:
            state.restore(counts)
        except ValueError as error:
            raise ConfigError(
                f"run {config.run!r} cannot take this config: {error}"
            ) from error
        self._store.save_config(config, declared=True)
        self._runs[config.run] = state
        return config

    def reload(self, stored: StoredState) -> None:
        """Rebuild every run from the store's saved configs and counts."""
        self._runs.clear()  # the same dict: ``get`` is bound to it
        for run, config in stored.configs.items():
            state = RunState(config, declared=run in stored.declared)
            state.restore(stored.counts.get(run, {}))
            self._runs[run] = state

    def for_event(self, run: str) -> RunState | None:
        """The run an event names, created if undeclared runs may be."""
        state = self._runs.get(run)
        if state is not None:
            return state
        if any(existing.declared for existing in self._runs.values()):
            return None
        if len(self._runs) >= self._max_undeclared_runs:
            return None
        config = RunConfig(run=run)
        self._store.save_config(config, declared=False)
        state = self._runs[run] = RunState(config, declared=False)
        return state

    def unknown_run_reason(self, run: str) -> str:
        """Why an event naming ``run`` found no run."""
        if not any(state.declared for state in self._runs.values()):
            return (
                f"unknown run {run!r}: already {len(self._runs)} runs "
                f"(max_undeclared_runs); declare runs up front"
            )
        declared = ", ".join(sorted(r for r, s in self._runs.items() if s.declared))
        return f"unknown run {run!r}; declared runs: {declared}"


def _validated_config(values: Mapping[str, object]) -> RunConfig:
    try:
        return RunConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid run config: {describe_validation_error(exc)}"
        ) from exc


def _check_scoring_unchanged(old: RunConfig, new: RunConfig) -> None:
    """Counted trials were scored with the old weights and rubric: keep them."""
    for name in ("weights", "rubric", "thresholds"):
        before, after = getattr(old, name), getattr(new, name)
        if before != after:
            raise ConfigError(
                f"run {new.run!r} already counted trials with {name} {before}; "
                f"cannot change them to {after}"
            )


# What the stopping rule is calibrated with from the first look on: its
# guarantee (a false claim in at most 1 - confidence of runs, however often
# it looks) holds for the values a run started with, not for a change midway.
_STOPPING_FIELDS: Final = (
    "confidence",
    "rule",
    "error_control",
    "target",
    "top_k",
    "equivalence_margin",
    "max_trials_per_question",
)


def _check_stopping_unchanged(old: RunConfig, new: RunConfig) -> None:
    """Counted trials were looked at under the old rule: keep its calibration."""
    for name in _STOPPING_FIELDS:
        before, after = getattr(old, name), getattr(new, name)
        if before != after:
            raise ConfigError(
                f"run {new.run!r} already counted trials with {name} {before}; "
                f"cannot change it to {after}: the stopping rule's guarantee holds "
                f"for the {name} a run started with, so {after} needs a new run"
            )


def _check_questions_unchanged(
    old: RunState, new: RunConfig, counts: Mapping[str, ModelCounts]
) -> None:
    """Counted trials were averaged over the old ``M``: keep it and them.

    ``M`` divides every model's mu, so changing the declared question set
    (its size, or whether there is one) would move scores with no new trial.
    """
    seen = {question for model in counts.values() for question in model.questions}
    if new.declared_question_count != old.config.declared_question_count or (
        (new.questions is None) != (old.config.questions is None)
    ):
        before = _question_declaration(old.config)
        raise ConfigError(
            f"run {new.run!r} already counted trials with {before}; cannot change "
            f"to {_question_declaration(new)}"
        )
    if new.questions is not None:
        missing = sorted(seen - set(new.questions))
        if missing:
            raise ConfigError(
                f"run {new.run!r} already counted trials on questions the new "
                f"questions list leaves out: {', '.join(map(repr, missing[:5]))}"
            )
    if new.models is not None:
        dropped = sorted(
            model
            for model, model_counts in counts.items()
            if model not in new.models and _has_trials(model_counts)
        )
        if dropped:
            raise ConfigError(
                f"run {new.run!r} already counted trials of models the new models "
                f"list leaves out: {', '.join(map(repr, dropped[:5]))}"
            )


def _has_trials(counts: ModelCounts) -> bool:
    return any(map(any, counts.observed)) or any(map(any, counts.prior))


def _question_declaration(config: RunConfig) -> str:
    if config.questions is not None:
        return f"a questions list of {len(config.questions)}"
    if config.question_count is not None:
        return f"question_count={config.question_count}"
    return "an open question set"
