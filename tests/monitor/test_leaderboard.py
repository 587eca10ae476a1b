"""The leaderboard at the widths terminals have: what gives way, what never does.

Rendered with rich at fixed widths, then read back as a user reads it
(:mod:`tests.monitor.screens`); the same in a real terminal is in
``test_terminal_view.py``.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console, RenderableType

from adapters.results_files import load_results_npz
from monitor import Monitor, RunConfig
from monitor.cli.terminal import (
    NEXT_BUDGET,
    Groupings,
    ViewOptions,
    scoreboard_table,
    status_view,
    terminal,
)
from monitor.engine.scoring import score_matrix
from monitor.schema import Status
from tests.monitor.scheduling import Clock
from tests.monitor.screens import leaderboard_of

ROOT = Path(__file__).resolve().parents[2]
LONG_NAMES = (
    "meta-llama/Llama-3.1-70B-Instruct",
    "Qwen/Qwen3-235B-A22B-Thinking-2507-FP8",
    "mistralai/Mistral-Large-Instruct-2411",
)
STATE = Path("runs/aime25.monitor.db")


def example_status(budget: int | None = 80) -> Status:
    """The quick start's run: examples/aime25.jsonl under its config."""
    monitor = Monitor()
    monitor.configure(
        RunConfig(run="aime25", question_count=30, max_trials_per_question=budget)
    )
    for line in (ROOT / "examples" / "aime25.jsonl").read_text().splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # the example's one broken line
        monitor.ingest([event])
    return monitor.status("aime25")


def long_names_status(trials: int) -> Status:
    """Three org/model names far apart in score, ``trials`` per question."""
    monitor = Monitor()
    monitor.configure(RunConfig(run="r", question_count=10, max_trials_per_question=20))
    rates = dict(zip(LONG_NAMES, (0.9, 0.5, 0.1), strict=True))
    draw = random.Random(7)
    for trial in range(trials):
        monitor.ingest(
            [
                {
                    "run": "r",
                    "model": model,
                    "question": question,
                    "trial": trial,
                    "correct": draw.random() < rate,
                }
                for question in range(10)
                for model, rate in rates.items()
            ]
        )
    return monitor.status("r")


def rendered(renderable: RenderableType, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return [line.rstrip() for line in console.export_text().splitlines()]


@pytest.mark.parametrize("width", [60, 80, 100, 140, 200])
def test_every_name_shows_whole_and_no_number_is_cut(width: int) -> None:
    status = long_names_status(3)
    lines = rendered(status_view(status), width)
    assert max(cell_len(line) for line in lines) <= width
    assert not [line for line in lines if "…" in line]
    headers, rows = leaderboard_of(lines)
    assert {"rank", "model", "mu"} <= set(headers)
    assert [row["model"] for row in rows] == [model.model for model in status.models]
    assert [row["rank"] for row in rows] == [str(model.rank) for model in status.models]
    assert [row["mu"] for row in rows] == [f"{model.mu:.4f}" for model in status.models]


def test_columns_give_way_the_plot_first_then_sigma_then_the_interval() -> None:
    status = example_status()
    everything = [
        "rank", "group", "model", "avg", "mu", "sigma", "interval", "", "trials",
        "needs",
    ]  # fmt: skip
    assert leaderboard_of(rendered(status_view(status), 140))[0] == everything
    wide = rendered(status_view(status), 100)
    assert leaderboard_of(wide)[0] == [h for h in everything if h]
    assert "not shown at 100 columns: interval plot (a wider" in "\n".join(wide)
    narrow = rendered(status_view(status), 80)
    assert leaderboard_of(narrow)[0] == [
        "rank", "group", "model", "avg", "mu", "trials", "needs",
    ]  # fmt: skip
    assert "not shown at 80 columns: interval plot, sigma, interval" in "\n".join(
        narrow
    )


def test_a_long_name_folds_only_once_the_plot_has_gone() -> None:
    status = long_names_status(3)
    longest = max(len(name) for name in LONG_NAMES)
    lines = rendered(status_view(status), 140)
    headers, _ = leaderboard_of(lines)
    assert "" not in headers and "sigma" in headers and "interval" in headers
    # One line per row: every name whole on its own line.
    body = [line for line in lines if line[:1] == "│"]
    assert len(body) == len(LONG_NAMES)
    assert all(any(name in line for line in body) for name in LONG_NAMES)
    assert longest > 20


@pytest.mark.parametrize(
    ("groups", "shown"),
    [
        ("settled", ["group"]),
        ("ci", ["CI group"]),
        ("both", ["settled group", "CI group"]),
    ],
)
def test_one_group_column_unless_both_are_asked_for(
    groups: Groupings, shown: list[str]
) -> None:
    status = example_status()
    lines = rendered(status_view(status, (), ViewOptions(groups)), 140)
    headers, rows = leaderboard_of(lines)
    assert [header for header in headers if "group" in header] == shown
    settled = [str(model.group) for model in status.models]
    ci = [str(model.adjacent_group) for model in status.models]
    assert settled != ci  # the example is where the two differ
    for header in shown:
        expected = ci if header == "CI group" else settled
        assert [row[header] for row in rows] == expected
    key = " ".join(" ".join(lines).split())
    if groups == "settled":
        assert "group: models the stopping rule has not yet told apart" in key
        assert "CI group" not in key
    else:
        assert "CI group: the paper's Table 1, neighbours split where z >= 1.64" in key


@pytest.mark.parametrize("width", [80, 140])
def test_avg_stands_beside_mu(width: int) -> None:
    status = example_status()
    headers, rows = leaderboard_of(rendered(status_view(status), width))
    assert headers[headers.index("avg") + 1] == "mu"
    assert [row["avg"] for row in rows] == [
        f"{model.avg:.4f}" for model in status.models if model.avg is not None
    ]


def test_the_score_table_has_avg_beside_mu_and_fits_80_columns() -> None:
    (matrix,) = load_results_npz(ROOT / "examples" / "paper11.npz")
    board = score_matrix(matrix, metrics=["pass@4"])
    lines = rendered(scoreboard_table(board), 80)
    assert max(cell_len(line) for line in lines) <= 80
    assert not [line for line in lines if "…" in line]
    headers, rows = leaderboard_of(lines)
    assert headers[:5] == ["rank", "group", "model", "avg", "mu"]
    assert "pass@4" in headers
    assert [row["model"] for row in rows] == [model.model for model in board.models]
    averages = [model.metrics["avg"].mu for model in board.models]
    assert [row["avg"] for row in rows] == [f"{avg:.4f}" for avg in averages]


def test_needs_and_trials_carry_their_unit() -> None:
    status = example_status()
    _, rows = leaderboard_of(rendered(status_view(status), 140))
    for row, model in zip(rows, status.models, strict=True):
        assert model.needs_trials and model.predicted_trials
        assert row["needs"] == f"~{model.predicted_trials:,} trials"
        assert row["trials"] == f"{model.trials:,}"
    header = rendered(status_view(status), 140)[0]
    assert "M=30 questions" in header


def test_an_unresolved_pair_says_the_z_it_needs_and_a_chance_short_of_certain() -> None:
    status = example_status()
    text = "\n".join(rendered(status_view(status), 200))
    open_pairs = [pair for pair in status.pairs if not pair.resolved]
    near_certain = [pair for pair in open_pairs if pair.rho > 0.9999]
    assert near_certain and any(pair.unresolvable for pair in open_pairs)
    for pair in open_pairs:
        line = f"  {pair.a} vs {pair.b}: z {pair.z:.2f}, "
        if pair.unresolvable:
            assert line + "a statistical tie at this budget (final)" in text
            continue
        assert pair.threshold is not None
        line += f"needs {pair.threshold:.2f} to settle; P({pair.a} better) "
        if pair.rho > 0.9999:
            assert line + ">99.99%" in text
        elif pair.rho >= 0.999:
            assert line + f"{pair.rho:.2%}" in text
        else:
            assert line + f"{pair.rho:.1%}" in text
    assert "100.0%" not in text and "rho" not in text


def last_lines(status: Status, options: ViewOptions | None = None) -> list[str]:
    """The view's lines from its ``next:`` line on (wide: one line a sentence)."""
    lines = rendered(status_view(status, (), options or ViewOptions()), 1000)
    starts = [index for index, line in enumerate(lines) if line.startswith("next: ")]
    assert len(starts) == 1
    return lines[starts[0] :]


def test_a_running_run_ends_with_the_next_command_and_its_forecast() -> None:
    status = example_status()
    total = sum(model.predicted_trials or 0 for model in status.models)
    assert total > NEXT_BUDGET
    assert last_lines(status, ViewOptions(state=STATE)) == [
        "next: run the trials `next` plans for the 11 models that need them "
        f"(the forecast: ~{total:,} trials more in all):",
        f"  scorio-monitor next --state {STATE} --run aime25 --budget {NEXT_BUDGET}",
    ]


def test_the_next_command_asks_for_no_more_than_the_forecast() -> None:
    status = long_names_status(3)
    total = sum(model.predicted_trials or 0 for model in status.models)
    assert 0 < total < NEXT_BUDGET
    lines = last_lines(status, ViewOptions(url="http://127.0.0.1:8000"))
    assert lines[-1] == (
        f"  scorio-monitor next --url http://127.0.0.1:8000 --run r --budget {total}"
    )


def test_a_stable_run_ends_with_how_to_export_and_gate() -> None:
    status = long_names_status(20)
    assert status.stable
    assert last_lines(status, ViewOptions(state=STATE)) == [
        "next: the ranking is settled (stable): no more trials are needed; export "
        "it for a report, or gate a model in CI:",
        f"  scorio-monitor status --state {STATE} --run r --format markdown",
        f"  scorio-monitor gate --state {STATE} --run r --candidate A --baseline B",
    ]
    _, rows = leaderboard_of(rendered(status_view(status), 140))
    assert {row["needs"] for row in rows} == {"no"}


def test_a_run_without_a_budget_says_how_to_declare_one() -> None:
    status = example_status(budget=None)
    assert not status.stable
    lines = last_lines(status)
    assert lines[0].startswith(
        "next: no budget is declared (add max_trials_per_question = N to the "
        "run's config, so that a tie can be called and forecasts have a bound). "
        "Run the trials `next` plans for the "
    )
    assert lines[-1] == f"  scorio-monitor next --run aime25 --budget {NEXT_BUDGET}"
    _, rows = leaderboard_of(rendered(status_view(status), 140))
    # A forecast against no bound is not shown.
    assert {row["needs"] for row in rows} <= {"yes", "no"}


def test_a_run_waiting_for_its_models_says_what_would_start_it() -> None:
    monitor = Monitor(clock=Clock(), look_interval_s=0)
    monitor.configure(RunConfig(run="r", questions=["q0", "q1"]))
    lines = last_lines(monitor.status("r"))
    assert lines == [
        "next: no budget is declared (add max_trials_per_question = N to the "
        "run's config, so that a tie can be called and forecasts have a bound). "
        "Nothing to run until what the run waits for changes: report a trial of "
        "each model, or declare the run's models."
    ]


def test_a_run_with_every_trial_in_flight_says_to_report_them() -> None:
    monitor = Monitor(clock=Clock(), look_interval_s=0)
    monitor.configure(
        RunConfig(
            run="r",
            questions=["q0", "q1"],
            models=["a", "b"],
            max_trials_per_question=1,
        )
    )
    assert sum(item.trials for item in monitor.next("r", 10, lease_s=60.0)) == 4
    status = monitor.status("r")
    assert [item.reason for item in status.waiting_for] == ["in_flight"]
    assert last_lines(status) == [
        "next: nothing to run until what the run waits for changes: report the "
        "trials already planned, or wait for their leases to expire."
    ]


def test_piped_text_is_one_line_a_paragraph_and_the_table_shows_every_column(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = long_names_status(3)
    console = terminal()
    assert not console.is_terminal  # pytest captures stdout
    console.print(status_view(status, (), ViewOptions(state=STATE)))
    lines = capsys.readouterr().out.splitlines()
    headers, rows = leaderboard_of(lines)
    assert headers == [
        "rank", "group", "model", "avg", "mu", "sigma", "interval", "", "trials",
        "needs",
    ]  # fmt: skip
    assert [row["model"] for row in rows] == list(LONG_NAMES)
    assert len([line for line in lines if line[:1] == "│"]) == len(LONG_NAMES)
    # Each paragraph whole on its line: nothing broken between words or inside one.
    key = [line for line in lines if line.startswith("group: ")]
    assert len(key) == 1 and key[0].endswith("interval: 95% credible.")
    (pairs,) = [line for line in lines if line.startswith("unresolved pairs (")]
    assert pairs.endswith("shares its error over the ranking):")
    assert lines[-1] == f"  scorio-monitor next --state {STATE} --run r --budget " + (
        str(sum(model.predicted_trials or 0 for model in status.models))
    )
    assert all(line == line.rstrip() for line in lines)


def test_names_with_brackets_show_as_written() -> None:
    monitor = Monitor()
    for model in ("org/model[v2]", "x[bold]"):
        monitor.ingest(
            [
                {
                    "run": "r[1]",
                    "model": model,
                    "question": 1,
                    "trial": 0,
                    "correct": True,
                }
            ]
        )
    lines = rendered(status_view(monitor.status("r[1]")), 100)
    assert lines[0].startswith("r[1]  ·  M=1 question (open: questions seen)")
    _, rows = leaderboard_of(lines)
    assert sorted(row["model"] for row in rows) == ["org/model[v2]", "x[bold]"]
