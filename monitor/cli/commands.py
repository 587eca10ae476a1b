"""The command line's parser: every command and option, nothing heavy.

Each command names its handler as ``"module:function"`` in
:mod:`monitor.cli`; only the chosen command's module is imported, so
``--help`` and a mistyped option answer at once instead of after numpy,
scipy and the web stack load (``benchmarks/startup.py`` measures it).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from monitor.cli.common import DEFAULT_STATE, Subparsers, add_url_arguments

INGEST_FORMATS = ("lm-eval", "jsonl", "csv", "npz", "inspect")
TRIAL_FIELDS = ("run", "model", "question", "trial", "category", "correct")


def add_commands(commands: Subparsers) -> None:
    """Every command, in the order ``--help`` lists them."""
    _live_commands(commands)
    _files_commands(commands)
    _serving_commands(commands)
    _simulating_commands(commands)
    _planning_commands(commands)


_STATE_HELP = (
    f"state file (default: {DEFAULT_STATE}, else the only *.monitor.db in this "
    "directory or one below)"
)


def _live_commands(commands: Subparsers) -> None:
    watch_command = commands.add_parser(
        "watch",
        help="ingest JSON-lines trial events and show where every model stands",
        description=(
            "Ingest trial events (one JSON object, or an array, per line) from a "
            "file or '-' for stdin; show a live leaderboard. State is kept in a "
            "SQLite file, so a restarted watch resumes where it stopped."
        ),
    )
    watch_command.add_argument("path", help="JSONL file, or - for stdin")
    watch_command.add_argument(
        "--follow", action="store_true", help="keep reading as the file grows"
    )
    watch_command.add_argument(
        "--config", type=Path, help="run config TOML (one run or [[runs]])"
    )
    watch_command.add_argument(
        "--state",
        type=Path,
        help="state file (default: <input>.monitor.db next to the input, or "
        f"{DEFAULT_STATE} for stdin)",
    )
    watch_command.add_argument(
        "--json", action="store_true", help="print the final status JSON"
    )
    watch_command.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="also serve the API and live dashboard on 127.0.0.1:PORT until stopped",
    )
    watch_command.add_argument(
        "--token",
        default=os.environ.get("SCORIO_MONITOR_HTTP_TOKEN"),
        help="with --http: bearer token the write routes then need; with --url: "
        "the token sent (default: $SCORIO_MONITOR_HTTP_TOKEN, which keeps it "
        "out of the process list)",
    )
    _add_groups_argument(watch_command)
    add_url_arguments(watch_command, token=False)
    watch_command.set_defaults(handler="live:run_watch")

    status = commands.add_parser(
        "status", help="print the status of runs in a state file"
    )
    status.add_argument("--state", type=Path, help=_STATE_HELP)
    status.add_argument("--run", help="one run (default: all)")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument(
        "--compare",
        metavar="RUN_A,RUN_B",
        help="runs side by side: each model's rank, group, mu and interval per run",
    )
    _add_format_argument(status)
    _add_groups_argument(status)
    status.set_defaults(handler="reading:run_status")

    plan = commands.add_parser(
        "next",
        help="which trials to run next",
        description=(
            "Plan BUDGET trials. Asked of a running service (--url), the plan "
            "is a reservation: its trials count as in flight in every later "
            "plan until reported or until the lease expires. A state file is "
            "read as it is: its plan reserves nothing."
        ),
    )
    plan.add_argument("--state", type=Path, help=_STATE_HELP)
    plan.add_argument(
        "--url", help="a running service's HTTP API, e.g. http://127.0.0.1:8000"
    )
    plan.add_argument("--token", help="bearer token for --url")
    plan.add_argument(
        "--run", help="the run (default: the state file's only run; --url needs it)"
    )
    plan.add_argument("--budget", type=int, required=True, help="trials to allocate")
    plan.add_argument(
        "--lease-s",
        type=float,
        default=None,
        help="--url: how long the reservation lasts (default: the service's, 600)",
    )
    plan.add_argument("--json", action="store_true", help="print JSON")
    plan.set_defaults(handler="reading:run_next")


def _files_commands(commands: Subparsers) -> None:
    score = commands.add_parser(
        "score",
        help="batch Bayes@N over a results file",
        description=(
            "Score a finished results file: an .npz of (models, questions, trials) "
            "arrays, or CSV/JSONL trial rows with model, question, trial and "
            "category (or correct)."
        ),
    )
    score.add_argument("file", type=Path, help=".npz, .csv or .jsonl results")
    score.add_argument("--json", action="store_true", help="print JSON, not a table")
    _add_format_argument(score)
    score.add_argument("--confidence", type=float, default=0.95, help="interval level")
    score.add_argument(
        "--weights",
        type=_weights,
        default=None,
        help="category weights, comma separated (default 0,1 for binary results)",
    )
    score.add_argument(
        "--question-count",
        type=int,
        default=None,
        help="the benchmark's M for row files (default: questions seen)",
    )
    score.add_argument(
        "--metrics",
        type=_metrics,
        default=[],
        help="more metrics beside Bayes@N and avg, comma separated, e.g. "
        "pass@4,maj@5,max@2 (the run config's metrics syntax)",
    )
    score.set_defaults(handler="files:run_score")

    ingest = commands.add_parser(
        "ingest",
        help="ingest a harness's results files into a state file",
        description=(
            "Ingest finished results: lm-eval --log_samples output (a samples "
            "file, or the --output_path directory, optionally followed for new "
            "files), JSONL or CSV trial rows (with a column and value mapping), "
            "or an .npz of (models, questions, trials) arrays. Counts go into a "
            "SQLite state file like watch; prints the final status."
        ),
    )
    _add_ingest_arguments(ingest)
    ingest.set_defaults(handler="files:run_ingest")


def _add_ingest_arguments(ingest: argparse.ArgumentParser) -> None:
    ingest.add_argument("path", type=Path, help="file, or an lm-eval output directory")
    ingest.add_argument("--format", required=True, choices=INGEST_FORMATS)
    ingest.add_argument(
        "--run",
        help="run of every trial (default: the lm-eval task, the rows' run "
        "column or the file's stem, the .npz array's key)",
    )
    ingest.add_argument(
        "--model",
        help="model of every trial (default: the lm-eval model name, the rows' "
        "model column, the .npz models array)",
    )
    ingest.add_argument(
        "--columns",
        type=_column_mapping,
        metavar="THEIRS=OURS,...",
        help="jsonl/csv: rename columns to run, model, question, trial, category "
        "or correct, e.g. sample_id=question,epoch=trial,score=category",
    )
    ingest.add_argument(
        "--values",
        type=_value_mapping,
        metavar="VALUE=CATEGORY,...",
        help="map outcome values onto categories, e.g. C=1,I=0 (lm-eval: "
        "logged fractions, e.g. 0=0,0.5=1,1=2)",
    )
    ingest.add_argument(
        "--repeats",
        action="store_true",
        help="lm-eval: one trial per generation, re-scored with the task's "
        "filter and exact_match settings (default: one trial per document)",
    )
    ingest.add_argument(
        "--filter", help="lm-eval: whose lines to read (default: the task's first)"
    )
    ingest.add_argument(
        "--metric", help="lm-eval: the logged metric (default: each line's first)"
    )
    ingest.add_argument(
        "--scorer",
        help="inspect: the scorer whose value is the outcome (default: each "
        "sample's first)",
    )
    ingest.add_argument(
        "--follow",
        action="store_true",
        help="lm-eval: keep reading new samples files until interrupted",
    )
    ingest.add_argument(
        "--config", type=Path, help="run config TOML (one run or [[runs]])"
    )
    ingest.add_argument(
        "--state",
        type=Path,
        help="state file (default: <input>.monitor.db next to the input)",
    )
    ingest.add_argument(
        "--json", action="store_true", help="print the final status JSON"
    )
    add_url_arguments(ingest)


def _serving_commands(commands: Subparsers) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the service: sources, shared state, status and metrics",
        description=(
            "Run the asyncio service from a TOML config: the embedded SQLite "
            "store by default, or Redis shared by several workers; trials over "
            "HTTP, MQTT or Redis Streams; status over HTTP and MQTT; Prometheus "
            "metrics at /metrics. Every config key may come from the environment "
            "as SCORIO_MONITOR_<SECTION>_<KEY> (for secrets)."
        ),
    )
    serve.add_argument("--config", type=Path, help="service config TOML (optional)")
    serve.set_defaults(handler="serving:run_serve")

    view = commands.add_parser(
        "view",
        help="open a state file's dashboard, read-only",
        description=(
            "Serve the dashboard and the API of a state file read-only, with no "
            "config to write: the whole ranking trace of a finished run, or a "
            "run still being written (the view follows the writer). Every write "
            "answers 405."
        ),
    )
    view.add_argument("state", type=Path, help="the state file (.monitor.db)")
    view.add_argument(
        "--port", type=int, default=7575, help="port (default 7575; 0: any free one)"
    )
    view.add_argument("--host", default="127.0.0.1", help="address (default loopback)")
    view.set_defaults(handler="viewing:run_view")


def _simulating_commands(commands: Subparsers) -> None:
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
    simulation.add_argument(
        "--models",
        default="paper11",
        help="paper11 (the paper's eleven models) or aime20",
    )
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
    simulation.add_argument(
        "--error-control",
        choices=["ranking", "pair"],
        default="ranking",
        help="share the error over the ranking (default) or per pair",
    )
    simulation.add_argument(
        "--equivalence-margin",
        type=float,
        default=None,
        help="declare pairs closer than this (score units) equivalent",
    )
    simulation.add_argument(
        "--arrival",
        choices=["least_sampled", "question_major"],
        default="least_sampled",
        help="trials where next plans them, or every trial of a question first",
    )
    simulation.add_argument("--json", action="store_true", help="print JSON")
    simulation.set_defaults(handler="simulating:run_simulate")


def _add_format_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--format",
        choices=("table", "json", "markdown", "csv"),
        default=None,
        help="table (default, for a terminal), json (as --json), markdown (one "
        "table per run, for reports and PR descriptions) or csv (one row per model)",
    )


def _add_groups_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--groups",
        choices=("settled", "ci", "both"),
        default="settled",
        help="the table's group column: settled (default: the stopping rule's "
        "groups, what next and stable act on), ci (the paper's Table 1 "
        "grouping, as score shows) or both",
    )


def _planning_commands(commands: Subparsers) -> None:
    plan = commands.add_parser(
        "plan",
        help="how many trials a run will take under the monitor's rule",
        description=(
            "Plan a run before it starts: the run's own stopping rule played "
            "forward on simulated runs (seeded). Answers the expected total "
            "trials (10-90 % range), trials per question per model, the share "
            "of adjacent pairs resolved at the cap and the smallest adjacent gap "
            "resolved with 80 % power (mde). From --means and --questions, or "
            "from a pilot run's counts (--pilot STATE --run R)."
        ),
    )
    plan.add_argument(
        "--means", type=_weights, help="the models' expected scores, comma separated"
    )
    plan.add_argument("--questions", type=_positive_int, help="questions M")
    plan.add_argument(
        "--cap",
        type=_positive_int,
        default=None,
        help="max trials per question (default 80, or the pilot run's)",
    )
    plan.add_argument(
        "--confidence",
        type=float,
        default=None,
        help="confidence (default 0.95, or the pilot run's)",
    )
    plan.add_argument(
        "--spread",
        type=float,
        default=None,
        help="per-question difficulty spread: sd of a model's per-question "
        "score at mean 0.5, in [0, 0.5); 0 = every question alike (default "
        "0.2, about the paper's; with --pilot, estimated from its counts)",
    )
    plan.add_argument(
        "--weights", type=_weights, default=None, help="category weights (default 0,1)"
    )
    plan.add_argument(
        "--target", choices=["ranking", "top_k", "leader"], default="ranking"
    )
    plan.add_argument("--top-k", type=_positive_int, default=None, help="for top_k")
    plan.add_argument("--error-control", choices=["ranking", "pair"], default="ranking")
    plan.add_argument("--rule", choices=["sequential", "paper"], default="sequential")
    plan.add_argument("--seed", type=int, default=20261, help="simulation seed")
    plan.add_argument("--pilot", type=Path, help="a pilot run's state file")
    plan.add_argument("--run", help="with --pilot: the pilot run")
    plan.add_argument("--json", action="store_true", help="print JSON")
    plan.set_defaults(handler="planning_cmds:run_plan")

    gate = commands.add_parser(
        "gate",
        help="release gate: is the candidate no worse than the baseline?",
        description=(
            "Test the candidate against the baseline under the run's rule and "
            "confidence, valid however often it is asked. Exit 0 (pass) when "
            "the candidate is shown no worse than the baseline minus --margin "
            "(with --better: better than the baseline plus --margin), 1 (fail) "
            "when shown otherwise, 2 while inconclusive."
        ),
    )
    gate.add_argument("--state", type=Path, help=_STATE_HELP)
    gate.add_argument("--run", required=True, help="the run")
    gate.add_argument("--candidate", required=True, help="the new model")
    gate.add_argument("--baseline", required=True, help="the model it would replace")
    gate.add_argument(
        "--margin", type=float, default=0.0, help="score units (default 0)"
    )
    gate.add_argument(
        "--better", action="store_true", help="require the candidate to be better"
    )
    gate.add_argument("--json", action="store_true", help="print JSON")
    gate.set_defaults(handler="planning_cmds:run_gate")


def _metrics(text: str) -> list[str]:
    # Imported here: the metric parser pulls in NumPy, which --help never needs.
    from scorio_core.count_metrics import MetricSpec

    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        try:
            MetricSpec.parse(name)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc
    return names


def _weights(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"weights must be numbers separated by commas; got {text!r}"
        ) from exc


def _column_mapping(text: str) -> dict[str, str]:
    pairs = _pairs(text)
    for theirs, ours in pairs.items():
        if ours not in TRIAL_FIELDS:
            raise argparse.ArgumentTypeError(
                f"{theirs}={ours}: a column maps to one of {', '.join(TRIAL_FIELDS)}"
            )
    return pairs


def _value_mapping(text: str) -> dict[str, int]:
    mapping = {}
    for value, category in _pairs(text).items():
        if not category.isdigit():
            raise argparse.ArgumentTypeError(
                f"{value}={category}: a value maps to a category, an integer >= 0"
            )
        mapping[value] = int(category)
    return mapping


def _pairs(text: str) -> dict[str, str]:
    pairs = {}
    for part in text.split(","):
        key, equals, value = part.partition("=")
        if not equals or not key.strip() or not value.strip():
            raise argparse.ArgumentTypeError(
                f"expected NAME=VALUE pairs separated by commas; got {text!r}"
            )
        pairs[key.strip()] = value.strip()
    return pairs


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
