"""``simulate``: the paper's biased-coin models through the monitor's own loop."""

from __future__ import annotations

import argparse
import json
import math

from monitor.cli.common import Subparsers
from monitor.simulation import MODEL_SETS, simulate
from monitor.view import simulation_view, terminal


def add_commands(commands: Subparsers) -> None:
    simulation = commands.add_parser(
        "simulate",
        help="the paper's biased-coin models driven through the monitor's own loop",
        description=(
            "Simulate a benchmark: biased-coin models with per-question difficulty "
            "(Beta around each model's mean), driven through the engine: ask next, "
            "draw outcomes, ingest, until no model needs trials. Prints the trials "
            "used against the paper's fixed N=80 and the final grouping against the "
            "true order."
        ),
    )
    simulation.add_argument("--models", choices=sorted(MODEL_SETS), default="paper11")
    simulation.add_argument(
        "--rule", choices=["sequential", "paper"], default="sequential"
    )
    simulation.add_argument("--seed", type=int, default=0)
    simulation.add_argument(
        "--cap", type=_positive_int, default=80, help="max trials per question"
    )
    simulation.add_argument(
        "--kappa",
        type=_positive_float,
        default=None,
        help="Beta concentration (> 0; default: the model set's)",
    )
    simulation.add_argument("--json", action="store_true", help="print JSON")
    simulation.set_defaults(handler=run_simulate)


def run_simulate(arguments: argparse.Namespace) -> int:
    means, kappa = MODEL_SETS[arguments.models]
    result = simulate(
        means,
        rule=arguments.rule,
        budget_per_question=arguments.cap,
        kappa=arguments.kappa or kappa,
        seed=arguments.seed,
    )
    if arguments.json:
        report = {
            "models": arguments.models,
            "rule": arguments.rule,
            "seed": arguments.seed,
            "trials": result.trials,
            "fixed_n80_trials": result.fixed_trials,
            "savings": 1.0 - result.trials / result.fixed_trials,
            "false_claims": result.false_claims,
            "resolved_pairs": result.resolved_pairs,
            "resolvable_pairs": result.resolvable_pairs,
            "true_means": result.true_means,
            "status": result.status.model_dump(mode="json"),
        }
        print(json.dumps(report, indent=2))
        return 0
    console = terminal()
    console.print(simulation_view(result))
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a number > 0; got {text!r}")
    return value
