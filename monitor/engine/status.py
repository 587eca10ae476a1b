"""Statuses: a run's standings, decisions and forecasts as one value.

A status reads the run's current decision (looking first when it may be
stale), each model's table and costs, the store's totals, and forecasts of
the trials each model and pair still needs; forecasts are simulated once per
decision and memoised by pair state between statuses.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

from monitor.decisions.decide import RunDecision, SettledPair, forecast_trials
from monitor.engine.live_metrics import AVG, model_metrics
from monitor.engine.looks import Looks
from monitor.engine.registry import Registry
from monitor.engine.runs import RunState
from monitor.interfaces import Store
from monitor.limits import FORECAST_MEMO_SIZE
from monitor.schema import Decision, ModelStatus, PairStatus, Status, Waiting


class Statuses:
    """Builds each run's :class:`Status`.

    Args:
        store: Where the run's totals are read.
        registry: The runs' live state.
        looks: The runs' current decisions.
        waiting_for: Why ``next`` gives a run's models no trials, given its
            decision (the planner's answer).
    """

    def __init__(
        self,
        store: Store,
        registry: Registry,
        looks: Looks,
        waiting_for: Callable[[str, RunDecision], list[Waiting]],
    ) -> None:
        self._waiting_for = waiting_for
        self._store = store
        self._registry = registry
        self._looks = looks
        # Simulated forecast ends by pair state, kept between statuses.
        self._forecast_memo: dict[str, dict[tuple[object, ...], float]] = {}
        # Forecasts of the current decision, made when a status asks for them.
        self._forecasts: dict[
            str, tuple[RunDecision, dict[str, int | None], dict[int, int | None]]
        ] = {}

    def status(self, run: str) -> Status:
        """The run's status; looks first if trials arrived since the last look."""
        state = self._registry.run(run)
        decision = self._looks.decision(run)
        model_forecasts, pair_forecasts = self._forecast(run, state, decision)
        totals = self._store.totals(run)
        tables = state.tables
        prior_trials = sum(table.prior_trial_count for table in tables.values())
        models = []
        metrics = model_metrics(state.config, tables, decision.order)
        for name, live in zip(decision.order, metrics, strict=True):
            table = tables[name]
            cost = state.costs.get(name)
            low, high = table.interval(state.config.confidence, table.score_range)
            models.append(
                ModelStatus(
                    model=name,
                    mu=table.mu,
                    avg=live[AVG].mu if AVG in live else None,
                    sigma=table.sigma,
                    lo=low,
                    hi=high,
                    trials=table.trial_count,
                    rank=decision.ranks[name],
                    group=decision.groups[name],
                    adjacent_group=decision.adjacent_groups[name],
                    needs_trials=name in decision.needs_trials,
                    predicted_trials=model_forecasts.get(name),
                    budget_exhausted=name in decision.exhausted,
                    cost_tokens=cost.tokens if cost is not None else 0,
                    # A sum past the largest float (1e308 s reported twice)
                    # shows as that float: JSON has no infinity.
                    cost_seconds=min(cost.seconds, sys.float_info.max)
                    if cost is not None
                    else 0.0,
                    metrics=live,
                )
            )
        pairs = [
            PairStatus(
                a=pair.a,
                b=pair.b,
                z=pair.z if math.isfinite(pair.z) else 1e308,
                rho=pair.rho,
                resolved=pair.resolved,
                unresolvable=pair.unresolvable,
                equivalent=pair.equivalent,
                threshold=pair.threshold,
                decision=None if pair.decision is None else _decision(pair.decision),
                predicted_trials=pair_forecasts.get(index, 0),
            )
            for index, pair in enumerate(decision.pairs)
        ]
        return Status(
            run=run,
            rule=state.config.rule,
            error_control=state.config.error_control,
            confidence=state.config.confidence,
            stable=decision.stable,
            trials=totals.trials - prior_trials,
            prior_trials=prior_trials,
            duplicates=totals.duplicates,
            corrections=totals.corrections,
            rejected=totals.rejected,
            question_count=state.question_count,
            max_trials_per_question=state.config.max_trials_per_question,
            open=state.is_open,
            budget_exhausted=bool(decision.exhausted),
            models=models,
            pairs=pairs,
            decisions=[_decision(d) for d in decision.settled.decisions],
            waiting_for=self._waiting_for(run, decision),
        )

    def _forecast(
        self, run: str, state: RunState, decision: RunDecision
    ) -> tuple[dict[str, int | None], dict[int, int | None]]:
        cached = self._forecasts.get(run)
        if cached is not None and cached[0] is decision:
            return cached[1], cached[2]
        tables = state.tables
        memo = self._forecast_memo.setdefault(run, {})
        if len(memo) > FORECAST_MEMO_SIZE:
            memo.clear()
        models, pairs = forecast_trials(
            decision,
            lambda name: tables[name].question_trials,
            state.question_count,
            state.config.max_trials_per_question,
            memo,
        )
        self._forecasts[run] = (decision, models, pairs)
        return models, pairs

    def statuses(self) -> list[Status]:
        return [self.status(run) for run in self._registry.names]

    def models_needing_trials(self, run: str) -> list[str]:
        """The run's models that still need trials, best first."""
        decision = self._looks.decision(run)
        return [name for name in decision.order if name in decision.needs_trials]

    def models_drawing_trials(self, run: str) -> list[str]:
        """The run's models the stopping rule draws trials from now, best first."""
        decision = self._looks.decision(run)
        return [name for name in decision.order if name in decision.drawing]


def _decision(settled: SettledPair) -> Decision:
    return Decision(
        kind=settled.kind,
        a=settled.a,
        b=settled.b,
        z=settled.z,
        trials=settled.trials,
        look=settled.look,
        above=list(settled.above),
        below=list(settled.below),
        joiner=settled.joiner or None,
    )
