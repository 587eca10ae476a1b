"""Regenerate the example files: `.venv/bin/python examples/make_examples.py`.

paper11.npz   the paper's 11 biased-coin models, 30 questions, 80 trials each
              (kappa = 5, seed 2026), in scorio's data-file layout.
aime25.jsonl  a trial stream as an evaluation harness would send it: the same
              11 models, 20 epochs per question arriving interleaved, with a
              few duplicate deliveries, one corrected outcome and one line a
              broken producer wrote.
aime25.toml   the run's declaration for `scorio-monitor watch --config`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from monitor.engine.simulation import PAPER_MEANS, draw_results, draw_world

HERE = Path(__file__).resolve().parent
STREAM_EPOCHS = 20


def main() -> None:
    rng = np.random.default_rng(2026)
    world = draw_world(PAPER_MEANS, question_count=30, kappa=5.0, rng=rng)
    results = draw_results(world, trials=80, rng=rng)
    models = [f"llm{index + 1:02d}" for index in range(len(PAPER_MEANS))]
    np.savez_compressed(HERE / "paper11.npz", aime25=results, models=np.array(models))
    write_stream(results[:, :, :STREAM_EPOCHS], models, rng)


def write_stream(
    results: np.ndarray, models: list[str], rng: np.random.Generator
) -> None:
    events = []
    for epoch in range(results.shape[2]):
        wave = [
            {
                "run": "aime25",
                "model": models[m],
                "question": f"q{q + 1:02d}",
                "trial": epoch,
                "correct": bool(results[m, q, epoch]),
            }
            for m in range(results.shape[0])
            for q in range(results.shape[1])
        ]
        events.extend(wave[i] for i in rng.permutation(len(wave)))
    lines = [json.dumps(event, separators=(",", ":")) for event in events]
    for index in sorted(rng.choice(len(lines), size=40, replace=False), reverse=True):
        lines.insert(index + 5, lines[index])  # at-least-once delivery: repeats
    wrong = {**events[100], "correct": not events[100]["correct"]}
    lines.insert(50, json.dumps(wrong, separators=(",", ":")))  # corrected later
    lines.insert(700, '{"run":"aime25","model":"llm03","question":"q07","trial":')
    (HERE / "aime25.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
