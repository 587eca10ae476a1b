r"""scorio metrics with intervals straight from count tables (the live metrics).

The metrics and their syntax are in :mod:`scorio_core.metric_spec`
(:meth:`MetricSpec.parse`); each depends only on each question's outcome
counts, so the monitor computes it from the count tables it already keeps.

Uneven trial counts (the streaming case), per metric:

- Binary metrics: each question has its own Beta posterior
  ``Beta(1 + prior successes + c_a, 1 + prior failures + n_a - c_a)``, so a
  question with more trials is simply better known; a question with no
  trials contributes the prior's value; ``k`` may exceed ``n_a`` because the
  posterior metric is about ``k`` fresh trials. The geometric blends combine
  those per-question moments (delta method), as scorio does.
- ``max@k`` and ``bayes``: each question's own Dirichlet posterior
  (counts + prior outcomes + 1).
- ``avg``: the mean over questions with at least one trial of each
  question's observed mean, with ``sigma_a = (1/M') sqrt(sum_a (T_a/n_a)^2
  Var_a)``, as :attr:`CountTable.avg <scorio_core.counts.CountTable.avg>`.

With every question at the same ``N`` and no prior outcomes, each equals the
batch function on the results matrix: ``pass_at_k_ci(R, k, confidence)``,
``max_at_k_ci(R, k, w, confidence=..., bounds=(min w, max w))``,
``avg_ci(R, w, confidence, (min w, max w))`` and so on (tested). Intervals
are clipped to ``[0, 1]`` for binary metrics and ``[min w, max w]`` otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from scorio_core.credit import Credit, state_covariances, state_moments
from scorio_core.geometric import delta_method, upper_half_weights
from scorio_core.maxreward import max_posterior_terms
from scorio_core.metric_spec import (
    MAX_K,
    SYNTAX_HELP,
    MetricSpec,
    MetricValue,
    ModelCounts,
)
from scorio_core.posterior import ScaledWeights, clipped_interval, z_value

__all__ = [
    "MAX_K",
    "SYNTAX_HELP",
    "MetricSpec",
    "MetricValue",
    "ModelCounts",
    "live_metrics",
]


def live_metrics(
    specs: Sequence[MetricSpec],
    models: Sequence[ModelCounts],
    weights: NDArray[np.float64],
    confidence: float,
) -> list[dict[str, MetricValue]]:
    """Every requested metric for every model, in one vectorised pass per metric.

    Raises:
        ValueError: a binary metric for a run with more than two categories.
    """
    results: list[dict[str, MetricValue]] = [{} for _ in models]
    if not models:
        return results
    z = z_value(confidence)
    bank = _Rows(models)
    binary: _BinaryStates | None = None
    for spec in specs:
        if spec.is_binary and weights.size != 2:
            raise ValueError(
                f"metric {spec.text!r} needs binary outcomes; the run has "
                f"{weights.size} categories"
            )
        if spec.family == "avg":
            values = _avg(bank, weights)
        elif spec.family == "bayes":
            values = _bayes(bank, weights)
        elif spec.family == "max":
            values = _max(bank, weights, spec.k)
        else:
            binary = binary or _BinaryStates(bank)
            values = _binary(binary, spec)
        bounds = (
            (0.0, 1.0)
            if spec.is_binary
            else (float(weights.min()), float(weights.max()))
        )
        for index, value in enumerate(values):
            if value is None:
                continue
            mu, sigma = value
            low, high = clipped_interval(mu, z * sigma, bounds)
            results[index][spec.text] = MetricValue(mu, sigma, low, high)
    return results


class _Rows:
    """All models' count rows as distinct states and a models x states histogram.

    A state is a row of observed and prior counts; every metric is a per-state
    value summed over a model's questions, so it is computed once per distinct
    state (a few hundred for thousands of questions), not once per question.
    Each model also gets ``M - rows`` empty states for questions it has not seen.
    """

    def __init__(self, models: Sequence[ModelCounts]) -> None:
        self.model_count = len(models)
        width = models[0].observed.shape[1]
        # Prior outcomes are rare: leave their columns out when there are none.
        has_prior = any(m.prior is not None and m.prior.any() for m in models)
        blocks = [_block(model, has_prior) for model in models]
        unseen = np.maximum(
            [m.question_count - m.observed.shape[0] for m in models], 0
        ).astype(np.float64)
        # A state is keyed by a mixed-radix number of its counts; the empty
        # state (key 0) is always one of them.
        radices = [
            int(max((int(b[:, c].max()) for b in blocks if b.size), default=0)) + 1
            for c in range(blocks[0].shape[1])
        ]
        if math.prod(radices) > 1 << 62:
            states, self.histogram = _sorted_states(blocks, unseen)
        else:
            states, self.histogram = _keyed_states(blocks, unseen, radices)
        self.observed = states[:, :width]
        self.prior = states[:, width:] if has_prior else np.zeros_like(self.observed)
        self.question_counts = self.histogram.sum(axis=1)

    def total(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """Per-model sums over questions of per-state values."""
        return np.asarray(self.histogram @ values, dtype=np.float64)

    def seen_counts(self, seen: NDArray[np.bool_]) -> NDArray[np.float64]:
        return self.total(seen.astype(np.float64))


def _block(model: ModelCounts, has_prior: bool) -> NDArray[np.integer]:
    """A model's rows of observed (and, if any model has them, prior) counts."""
    if not has_prior:
        return model.observed
    prior = model.prior if model.prior is not None else np.zeros_like(model.observed)
    return np.hstack([model.observed, prior])


# Rows keyed at once by _keyed_states (a group of whole models): bounds its
# temporaries (about 60 bytes a row) to a few MB however many models there
# are, while a status of tens of models still takes a single group.
_GROUP_ROWS = 1 << 17


def _keyed_states(
    blocks: list[NDArray[np.integer]],
    unseen: NDArray[np.float64],
    radices: list[int],
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Distinct states (in key order) and the models x states histogram."""
    groups: list[tuple[NDArray[np.int64], NDArray[np.float64]]] = []
    first = rows = 0
    for last, block in enumerate(blocks):
        rows += block.shape[0]
        if rows >= _GROUP_ROWS or last == len(blocks) - 1:
            groups.append(_group_states(blocks[first : last + 1], radices))
            first, rows = last + 1, 0
    if len(groups) == 1:
        all_keys, histogram = groups[0]
    else:
        all_keys = np.unique(np.concatenate([keys for keys, _ in groups]))
        histogram = np.concatenate(
            [
                _spread(part, np.searchsorted(all_keys, keys), all_keys.size)
                for keys, part in groups
            ]
        )
    histogram[:, 0] += unseen  # the empty state has key 0, the smallest
    states = np.empty((all_keys.size, len(radices)), dtype=np.int64)
    remainder = all_keys.copy()
    for index in range(len(radices) - 1, -1, -1):
        states[:, index] = remainder % radices[index]
        remainder //= radices[index]
    return states, histogram


def _group_states(
    blocks: list[NDArray[np.integer]], radices: list[int]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Distinct keys of some models' rows (and 0) and their histogram."""
    stacked = np.concatenate(blocks)
    keys = np.zeros(stacked.shape[0] + 1, dtype=np.int64)  # and the empty key
    for column, radix in enumerate(radices):
        keys *= radix
        keys[:-1] += stacked[:, column]
    size = math.prod(radices)
    # A key space about the size of the rows is counted in linear time.
    if size <= max(1 << 16, keys.size):
        present = np.flatnonzero(np.bincount(keys, minlength=size))
        lookup = np.empty(size, dtype=np.int64)
        lookup[present] = np.arange(present.size)
        inverse = lookup[keys]
    else:
        present, inverse = np.unique(keys, return_inverse=True)
    owner = np.repeat(np.arange(len(blocks)), [block.shape[0] for block in blocks])
    codes = owner * present.size + inverse[:-1]
    histogram = np.bincount(codes, minlength=len(blocks) * present.size)
    return present, histogram.reshape(len(blocks), present.size).astype(np.float64)


def _spread(
    part: NDArray[np.float64], columns: NDArray[np.int64], width: int
) -> NDArray[np.float64]:
    """A group's histogram with its states at ``columns`` of ``width``."""
    spread = np.zeros((part.shape[0], width))
    spread[:, columns] = part
    return spread


def _sorted_states(
    blocks: list[NDArray[np.integer]], unseen: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`_keyed_states` for counts too large to key in 62 bits."""
    padding = np.zeros((len(blocks), blocks[0].shape[1]), dtype=np.int64)
    stacked = np.concatenate([*blocks, padding]).astype(np.int64)
    states, inverse = np.unique(stacked, axis=0, return_inverse=True)
    indices = np.arange(len(blocks))
    owner = np.concatenate(
        [np.repeat(indices, [block.shape[0] for block in blocks]), indices]
    )
    weight = np.concatenate([np.ones(stacked.shape[0] - len(blocks)), unseen])
    size = states.shape[0]
    histogram = np.bincount(
        owner * size + inverse.reshape(-1),
        weights=weight,
        minlength=len(blocks) * size,
    )
    return states, np.asarray(histogram, dtype=np.float64).reshape(len(blocks), size)


Pair = tuple[float, float] | None


def _summaries(
    bank: _Rows, means: NDArray[np.float64], variances: NDArray[np.float64]
) -> list[Pair]:
    mu = bank.total(means) / bank.question_counts
    sigma = np.sqrt(np.maximum(bank.total(variances), 0.0)) / bank.question_counts
    return [(float(m), float(s)) for m, s in zip(mu, sigma, strict=True)]


def _bayes(bank: _Rows, weights: NDArray[np.float64]) -> list[Pair]:
    scaled = ScaledWeights.from_weights(weights)
    unit = np.asarray(scaled.unit)
    nu = (bank.observed + bank.prior + 1).astype(np.float64)
    total = nu.sum(axis=1)
    p = nu / total[:, None]
    means = p @ unit
    variances = np.maximum(p @ (unit * unit) - means**2, 0.0) / (total + 1.0)
    return [
        None
        if pair is None
        else (scaled.offset + scaled.scale * pair[0], scaled.scale * pair[1])
        for pair in _summaries(bank, means, variances)
    ]


def _avg(bank: _Rows, weights: NDArray[np.float64]) -> list[Pair]:
    scaled = ScaledWeights.from_weights(weights)
    unit = np.asarray(scaled.unit)
    trials = bank.observed.sum(axis=1).astype(np.float64)
    seen = trials > 0
    nu = (bank.observed + bank.prior + 1).astype(np.float64)
    total = nu.sum(axis=1)
    p = nu / total[:, None]
    bayes_means = p @ unit
    variances = np.maximum(p @ (unit * unit) - bayes_means**2, 0.0) / (total + 1.0)
    safe = np.where(seen, trials, 1.0)
    means = np.where(seen, (bank.observed @ unit) / safe, 0.0)
    stretched = np.where(seen, (total / safe) ** 2 * variances, 0.0)
    counts = bank.seen_counts(seen)
    mean_sums = bank.total(means)
    variance_sums = bank.total(stretched)
    values: list[Pair] = []
    for count, mean_sum, variance_sum in zip(
        counts.tolist(), mean_sums.tolist(), variance_sums.tolist(), strict=True
    ):
        if count == 0:
            values.append(None)
            continue
        values.append(
            (
                scaled.offset + scaled.scale * (mean_sum / count),
                scaled.scale * math.sqrt(max(variance_sum, 0.0)) / count,
            )
        )
    return values


def _max(bank: _Rows, weights: NDArray[np.float64], k: int) -> list[Pair]:
    if k == 1:
        return _bayes(bank, weights)
    nu = (bank.observed + bank.prior + 1).astype(np.float64)
    means, sigmas = max_posterior_terms(nu, weights, k)
    largest = float(sigmas.max()) if sigmas.size else 0.0
    if largest == 0.0:
        return _summaries(bank, means, np.zeros_like(sigmas))
    # Rescale before squaring: sigmas near 1e308 would overflow.
    pairs = _summaries(bank, means, (sigmas / largest) ** 2)
    return [(pair[0], largest * pair[1]) if pair else None for pair in pairs]


class _BinaryStates:
    """Beta posteriors of the distinct states of a binary run."""

    def __init__(self, bank: _Rows) -> None:
        self.bank = bank
        successes = bank.observed[:, 1].astype(np.float64)
        failures = bank.observed[:, 0].astype(np.float64)
        self.alpha = 1.0 + bank.prior[:, 1] + successes
        self.beta = 1.0 + bank.prior[:, 0] + failures

    def per_row(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        return values


def _credit(spec: MetricSpec) -> Credit:
    if spec.family == "pass":
        return Credit.pass_at_k(spec.k)
    if spec.family == "pass_hat":
        return Credit.pass_hat_k(spec.k)
    if spec.family == "g_pass_tau":
        return Credit.g_pass_at_k_tau(spec.k, spec.tau or 0.0)
    if spec.family == "mg_pass":
        return Credit.mg_pass_at_k(spec.k)
    if spec.family == "maj":
        return Credit.majority(spec.k)
    return Credit.auc_at_k(spec.k)


def _binary(states: _BinaryStates, spec: MetricSpec) -> list[Pair]:
    bank = states.bank
    if spec.family in ("geom", "geom_ds", "geo_spectrum_star"):
        return _blend(states, spec)
    means, variances = state_moments(_credit(spec), states.alpha, states.beta)
    return _summaries(bank, states.per_row(means), states.per_row(variances))


def _blend(states: _BinaryStates, spec: MetricSpec) -> list[Pair]:
    first = Credit.pass_at_k(spec.k)
    if spec.family == "geo_spectrum_star":
        second = Credit.spectrum(upper_half_weights(spec.k))
    else:
        second = Credit.pass_hat_k(spec.k)
    first_means, first_variances = state_moments(first, states.alpha, states.beta)
    second_means, second_variances = state_moments(second, states.alpha, states.beta)
    covariances = state_covariances(first, second, states.alpha, states.beta)
    bank = states.bank
    if spec.family == "geom":
        pairs = [
            delta_method(
                (float(first_means[i]), float(second_means[i])),
                (float(first_variances[i]), float(second_variances[i])),
                float(covariances[i]),
                (0.5, 0.5),
            )
            for i in range(first_means.size)
        ]
        means = np.array([pair[0] for pair in pairs])
        variances = np.array([pair[1] for pair in pairs])
        return _summaries(bank, states.per_row(means), states.per_row(variances))
    count = bank.question_counts
    mean_x = bank.total(states.per_row(first_means)) / count
    mean_y = bank.total(states.per_row(second_means)) / count
    variance_x = bank.total(states.per_row(first_variances)) / count**2
    variance_y = bank.total(states.per_row(second_variances)) / count**2
    covariance = bank.total(states.per_row(covariances)) / count**2
    values: list[Pair] = []
    for index in range(bank.model_count):
        mean, variance = delta_method(
            (float(mean_x[index]), float(mean_y[index])),
            (float(variance_x[index]), float(variance_y[index])),
            float(covariance[index]),
            (0.5, 0.5),
        )
        values.append((mean, math.sqrt(variance)))
    return values
