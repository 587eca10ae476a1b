"""A model's standing as the decision tests build it: binary questions, each
with the same trials."""

from __future__ import annotations

from monitor.decisions.decide import Standing

M = 30


def standing(
    model: str,
    mu: float,
    sigma: float,
    per_question: float = 20.0,
    least: int | None = None,
) -> Standing:
    return Standing(
        model=model,
        mu=mu,
        sigma=sigma,
        lo=mu - 1.96 * sigma,
        hi=mu + 1.96 * sigma,
        trials=int(per_question * M),
        question_count=M,
        least_sampled=int(per_question) if least is None else least,
        # binary questions: sigma^2 = u / (n + 3) when all have n trials
        unit_variance=sigma**2 * (per_question + 3.0),
    )
