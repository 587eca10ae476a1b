"""Regenerate the example files: `python examples/make_examples.py`.

paper11.npz: the paper's 11 biased-coin models, 30 questions, 80 trials each
(kappa = 5, seed 2026), in scorio's data-file layout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from monitor.simulation import PAPER_MEANS, draw_results, draw_world

HERE = Path(__file__).resolve().parent


def main() -> None:
    rng = np.random.default_rng(2026)
    world = draw_world(PAPER_MEANS, question_count=30, kappa=5.0, rng=rng)
    results = draw_results(world, trials=80, rng=rng)
    models = np.array([f"llm{index + 1:02d}" for index in range(len(PAPER_MEANS))])
    np.savez_compressed(HERE / "paper11.npz", aime25=results, models=models)


if __name__ == "__main__":
    main()
