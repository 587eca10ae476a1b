"""``plan`` and ``gate``: how many trials a run will take, and a release gate."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from monitor.cli.common import checked_state, find_state, require_run
from monitor.engine.monitor import Monitor
from monitor.plans.gate import gate
from monitor.plans.pilot import pilot_request
from monitor.plans.plan import Plan, PlanRequest, plan
from monitor.stores.sqlite import SqliteStore


def run_plan(arguments: argparse.Namespace) -> int:
    if arguments.pilot is not None:
        if arguments.run is None:
            raise ValueError("--pilot needs --run: the pilot run to plan from")
        if arguments.means is not None:
            raise ValueError("give --means or --pilot, not both")
        pilot = checked_state(arguments.pilot, option="--pilot")
        with Monitor(SqliteStore(pilot, read_only=True)) as monitor:
            require_run(monitor, arguments.run, pilot)
            request = pilot_request(
                monitor,
                arguments.run,
                cap=arguments.cap,
                confidence=arguments.confidence,
                spread=arguments.spread,
                seed=arguments.seed,
            )
    else:
        if arguments.means is None or arguments.questions is None:
            raise ValueError(
                "plan needs --means and --questions (or --pilot STATE --run R)"
            )
        options: dict[str, Any] = {
            "weights": tuple(arguments.weights) if arguments.weights else (0.0, 1.0),
            "target": arguments.target,
            "top_k": arguments.top_k,
            "error_control": arguments.error_control,
            "rule": arguments.rule,
            "seed": arguments.seed,
        }
        if arguments.spread is not None:
            options["spread"] = arguments.spread
        request = PlanRequest(
            means=tuple(arguments.means),
            question_count=arguments.questions,
            cap=arguments.cap or 80,
            confidence=arguments.confidence or 0.95,
            **options,
        )
    result = plan(request)
    if arguments.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(describe(result))
    return 0


def describe(result: Plan) -> str:
    """The plan in a few lines a person reads."""
    request = result.request
    lines = [
        f"{len(request.means)} models, {request.question_count} questions, cap "
        f"{request.cap} trials per question, confidence {request.confidence:g}, "
        f"spread {request.spread:.3g} ({request.rule}, {request.error_control} "
        f"error control, target {request.target})",
        f"expected trials: {result.trials} (10-90 %: {result.trials_low}-"
        f"{result.trials_high}); fixed N = cap: {result.fixed_trials}",
        f"per question per model: {result.per_question:.1f} "
        f"(10-90 %: {result.per_question_low:.1f}-{result.per_question_high:.1f})",
    ]
    if result.resolved_share is None:
        lines.append("resolved share: none (no truly different adjacent pair)")
    elif request.target != "ranking":
        lines.append(
            f"expected share of runs setting the true top {request.top_k or 1} "
            f"apart: {result.resolved_share:.1%}"
        )
    else:
        lines.append(
            f"expected share of adjacent pairs resolved: {result.resolved_share:.1%}"
        )
    if result.mde is None:
        lines.append(f"mde: none ({'; '.join(result.notes) or 'not found'})")
    else:
        lines.append(
            f"mde (smallest adjacent gap resolved with 80 % power): {result.mde:.4f}"
        )
    lines.append("model\tmean\ttrials per question")
    lines.extend(
        f"{m.model}\t{m.mean:.4f}\t{m.trials_per_question:.1f}" for m in result.models
    )
    return "\n".join(lines)


def run_gate(arguments: argparse.Namespace) -> int:
    state = find_state(arguments.state)
    with Monitor(SqliteStore(state, read_only=True)) as monitor:
        require_run(monitor, arguments.run, state)
        verdict = gate(
            monitor,
            arguments.run,
            arguments.candidate,
            arguments.baseline,
            margin=arguments.margin,
            better=arguments.better,
        )
    if arguments.json:
        print(verdict.model_dump_json(indent=2))
    else:
        print(f"{verdict.verdict}: {verdict.reason}")
        trials = ", ".join(f"{m} {n}" for m, n in verdict.trials.items())
        print(f"trials: {trials}", file=sys.stderr)
    return verdict.exit_code
