"""``simulate``: the paper's biased-coin models through the monitor's own loop."""

from __future__ import annotations

import argparse
import json

from monitor.cli.terminal import simulation_view, terminal
from monitor.engine.simulation import MODEL_SETS, simulate


def run_simulate(arguments: argparse.Namespace) -> int:
    if arguments.models not in MODEL_SETS:
        raise ValueError(
            f"--models must be one of {', '.join(sorted(MODEL_SETS))}; "
            f"got {arguments.models!r}"
        )
    means, kappa = MODEL_SETS[arguments.models]
    result = simulate(
        means,
        rule=arguments.rule,
        budget_per_question=arguments.cap,
        kappa=arguments.kappa or kappa,
        seed=arguments.seed,
        error_control=arguments.error_control,
        equivalence_margin=arguments.equivalence_margin,
        arrival=arguments.arrival,
    )
    if arguments.json:
        report = {
            "models": arguments.models,
            "rule": arguments.rule,
            "error_control": arguments.error_control,
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
