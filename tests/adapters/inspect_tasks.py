"""Tasks for ``inspect eval`` runs in tests (the CLI imports this file).

``yesno``: ten questions whose target is ``yes``, scored with ``includes``,
answered by ``scorio-latency/<name>`` (tests/adapters/inspect_models.py,
imported here so the CLI knows the provider; the CLI resolves ``--model``
before it reads this file, so the task names its model: ``-T name=...``).
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

from tests.adapters import inspect_models

QUESTIONS = [f"q{index}" for index in range(10)]
PROVIDER = inspect_models.PROVIDER


@task
def yesno(
    epochs: int = 5, name: str = "a", pattern: str = "1", latency_s: float = 0.02
) -> Task:
    dataset = MemoryDataset([Sample(id=q, input=q, target="yes") for q in QUESTIONS])
    return Task(
        name="yesno",
        dataset=dataset,
        solver=generate(),
        scorer=includes(),
        epochs=epochs,
        model=get_model(
            f"{PROVIDER}/{name}", pattern=pattern, latency_s=latency_s, memoize=False
        ),
    )
