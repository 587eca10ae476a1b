"""Arrays of 1,000 JSON events in other shapes than the wire benchmark's.

Run: `.venv/bin/python benchmarks/wire_shapes.py`

`benchmarks/wire.py` measures one stream: 20 models x 1,000 questions,
integer question and trial ids, outcomes as ``correct``. This measures the
same mode (`ingest_payload` of arrays of 1,000 events, in memory, timed
after the first tenth) on streams that differ in one thing each, as a ratio
to the naive scorio recompute measured right before and after, to say
where a ratio holds and where it does not:

- ``reference``: the wire benchmark's stream;
- ``models_5`` / ``models_50``: 5 or 50 models;
- ``questions_10000``: 10,000 questions (a run declaring that many);
- ``text_ids``: question and trial ids as text (``"q17"``, ``"t3"``);
- ``category``: outcomes as ``category`` instead of ``correct``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable

from benchmarks.ingest import events
from benchmarks.wire import arrays, scorio_recompute_per_s
from monitor import Monitor, RunConfig


def declaring(questions: int) -> Callable[[], Monitor]:
    def configured() -> Monitor:
        monitor = Monitor()
        monitor.configure(
            RunConfig(
                run="bench", question_count=questions, max_trials_per_question=10_000
            )
        )
        return monitor

    return configured


def shapes(trials: int) -> dict[str, tuple[list[dict[str, object]], int]]:
    """Each shape's stream and the questions its run declares."""
    reference = events(trials, models=20, questions=1000, seed=0)
    return {
        "reference": (reference, 1000),
        "models_5": (events(trials, models=5, questions=1000, seed=1), 1000),
        "models_50": (events(trials, models=50, questions=1000, seed=2), 1000),
        "questions_10000": (
            events(trials, models=20, questions=10_000, seed=3),
            10_000,
        ),
        "text_ids": (
            [
                dict(
                    event, question=f"q{event['question']}", trial=f"t{event['trial']}"
                )
                for event in reference
            ],
            1000,
        ),
        "category": (
            [
                {
                    **{key: value for key, value in event.items() if key != "correct"},
                    "category": int(bool(event["correct"])),
                }
                for event in reference
            ],
            1000,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1_000_000)
    arguments = parser.parse_args()
    report: dict[str, object] = {"cores": os.cpu_count(), "trials": arguments.trials}
    for name, (stream, questions) in shapes(arguments.trials).items():
        before = scorio_recompute_per_s().per_second
        rates = arrays(
            stream, 1000, None, len(stream) // 10, configure=declaring(questions)
        )
        after = scorio_recompute_per_s().per_second
        report[f"{name}_per_s"] = round(rates.per_second)
        report[f"{name}_x_scorio"] = round(rates.per_second / ((before + after) / 2), 1)
        print(name, report[f"{name}_per_s"], report[f"{name}_x_scorio"], flush=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
