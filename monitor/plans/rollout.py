"""The run's stopping rule played forward on many simulated runs at once.

:func:`roll` is :func:`monitor.decisions.decide` and the ``simulate`` loop
(:mod:`monitor.engine.simulation`) restated over arrays, replicates x
models, so that a plan of 200 runs of 20 models takes a fraction of a
second: at each look, every model that needs trials draws one more step of
information; then the look orders the models within their settled
segments, resolves boundaries by Holm's step-down (each at the run's rule
for its share, a boundary resolving only when every pair across it within
its segment is settled), links for good the weakest pair of each open
boundary that is futile (at the most hopeful share) or cannot draw, opens
the rest (their weakest pair's models need trials), and marks done the
models of quiet segments. Same rule objects as the engine
(:func:`monitor.decisions.decide.build_rule`), same block, Holm, futility
and done logic.

What differs: a model's score is a Brownian sum with the outcome model's
expected variances (:mod:`monitor.plans.outcomes`) instead of counts on
questions, and the looks come every ``step`` trials per question.
``benchmarks/plan_calibration.py`` compares the result with runs through
the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray
from threadpoolctl import threadpool_limits

from monitor.plans.outcomes import Outcomes
from scorio_core.stopping import SequentialRule, StoppingRule

# Pairs of models up to 2 _BAND - 1 places apart in the order are compared.
_BAND: Final = 4

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Field:
    """What the runs share: models, questions, cap, rule, targets, looks.

    ``outcomes``: the models' outcome model, or several (same number of
    models and categories): replicate ``r`` plays ``outcomes[r % len]``.
    ``targets``: the claimable boundary positions (``0`` is between the
    first and second model of the order). ``looks``: looks up to the cap;
    each step adds ``cap / looks`` trials per question.
    """

    outcomes: tuple[Outcomes, ...]
    question_count: int
    cap: int
    targets: tuple[int, ...]
    rule_for: Callable[[int], StoppingRule]
    looks: int


@dataclass(frozen=True, slots=True)
class Start:
    """A run's state to roll on from, per model (unit scale), for forecasts.

    ``trials``: trials per question so far; ``sums``: the per-question
    average score sums the posterior means come from (``mu (n + C) - C/2``);
    ``segments`` (numbered from the top), ``linked`` (models x models) and
    ``done``: what the run has settled; ``needs``: who draws first.
    ``means``: each replicate's true means (replicates x models; else the
    outcome model's); ``scale``: a factor on each model's variances, so
    the rolled posterior starts where the run's is.
    """

    trials: FloatArray
    sums: FloatArray
    segments: IntArray
    linked: BoolArray
    done: BoolArray
    needs: BoolArray
    means: FloatArray | None = None
    scale: FloatArray | None = None


@dataclass(frozen=True, slots=True)
class Rollouts:
    """Where each simulated run ended: replicates x models."""

    trials_per_question: FloatArray
    groups: IntArray


def roll(
    field: Field,
    replicates: int,
    rng: np.random.Generator,
    start: Start | None = None,
) -> Rollouts:
    """Simulate ``replicates`` runs of ``field`` until no model needs trials,
    from zero trials or from ``start``."""
    # The looks' small matrix products are fastest on one thread; a BLAS
    # spreading them over busy cores took 100 times longer.
    with threadpool_limits(limits=1, user_api="blas"):
        return _roll(field, replicates, rng, start)


def _roll(
    field: Field, replicates: int, rng: np.random.Generator, start: Start | None
) -> Rollouts:
    size = field.outcomes[0].means.size
    step = field.cap / field.looks
    grid = np.arange(field.looks + 1, dtype=np.float64) * step
    kinds = len(field.outcomes)
    kind = np.arange(replicates) % kinds
    base = np.zeros(size) if start is None else start.trials
    # looks+1 x models per outcome model, then per replicate.
    points = grid if start is None else base[None, :] + grid[:, None]
    tables = np.stack([o.posterior_variance(points) for o in field.outcomes])
    means = np.stack([o.means for o in field.outcomes])[kind]
    variances = np.stack([o.trial_variance for o in field.outcomes])[kind]
    if start is not None:
        if start.means is not None:
            means = start.means
        if start.scale is not None:
            tables = tables * start.scale
            variances = variances * start.scale
    drift = means * step
    noise = np.sqrt(variances / field.question_count * step)
    # Looks each model may still draw before its cap.
    limit = (
        np.full(size, field.looks)
        if start is None
        else np.maximum(np.ceil((field.cap - base) / step - 1e-9), 0).astype(np.int64)
    )
    level = np.zeros((replicates, size), dtype=np.int64)
    if start is None:
        sums = np.zeros((replicates, size))
        state = _State(
            segments=np.zeros((replicates, size), dtype=np.int64),
            linked=np.zeros((replicates, size, size), dtype=bool),
            done=np.zeros((replicates, size), dtype=bool),
        )
        needs = np.ones((replicates, size), dtype=bool)
    else:
        sums = np.repeat(start.sums[None, :], replicates, axis=0)
        state = _State(
            segments=np.repeat(start.segments[None, :], replicates, axis=0),
            linked=np.repeat(start.linked[None, :, :], replicates, axis=0),
            done=np.repeat(start.done[None, :], replicates, axis=0),
        )
        needs = np.repeat((start.needs & (limit > 0))[None, :], replicates, axis=0)
    look = _Look(field, size)
    active = np.arange(replicates)
    if start is not None:
        active = active[needs.any(axis=1)]
    while active.size:
        shocks = rng.standard_normal((replicates, size))[active]
        drawing = needs[active]
        sums[active] += drawing * (drift[active] + noise[active] * shocks)
        level[active] += drawing
        here = level[active]
        needs[active] = look.run(
            state,
            active,
            sums[active],
            _trials(base, here, step, field.cap, start),
            tables[kind[active][:, None], here, np.arange(size)[None, :]],
        )
        needs[active] &= level[active] < limit
        active = active[needs[active].any(axis=1)]
    return Rollouts(
        trials_per_question=_trials(base, level, step, field.cap, start),
        groups=state.segments,
    )


def _trials(
    base: FloatArray, level: IntArray, step: float, cap: int, start: Start | None
) -> FloatArray:
    """Trials per question after ``level`` steps (a start's last step stops
    at the cap)."""
    trials = np.asarray(base + level * step, dtype=np.float64)
    return trials if start is None else np.minimum(trials, float(cap))


@dataclass(slots=True)
class _State:
    """What the runs have settled, in model coordinates (mutated by looks)."""

    segments: IntArray
    linked: BoolArray
    done: BoolArray


class _Look:
    """One look of :func:`decide` over the active replicates.

    Pairs are those of models at most ``2 _BAND - 1`` places apart in the
    order (all of them in fields of up to ``2 _BAND`` models): a pair
    further apart spans more boundaries and its gap is the sum of theirs,
    so it is settled when theirs are. Arrays are replicates x pairs.
    """

    def __init__(self, field: Field, size: int) -> None:
        self._field = field
        self._size = size
        self._rules: dict[int, StoppingRule] = {}
        self._constants: FloatArray | None = None
        self._hopeful = field.rule_for(1)
        claims = np.zeros(max(size - 1, 0), dtype=bool)
        claims[list(field.targets)] = True
        self.claims = claims
        width = min(2 * _BAND - 1, max(size - 1, 1))
        first, second = np.nonzero(
            np.triu(np.ones((size, size), dtype=bool), 1)
            & np.tril(np.ones((size, size), dtype=bool), width)
        )
        self.first, self.second = first, second
        boundaries = np.arange(max(size - 1, 0))
        # across[pair, k]: the pair crosses boundary k.
        across = (first[:, None] <= boundaries[None, :]) & (
            second[:, None] > boundaries[None, :]
        )
        self._across = across.astype(np.float32)
        # For each boundary, every compared pair across it (padded): the
        # pairs its weakest and futile pairs are sought among, the same the
        # block test counts.
        crossing = [np.flatnonzero(across[:, k]) for k in boundaries]
        widest = max((c.size for c in crossing), default=1)
        pairs = np.zeros((len(crossing), widest), dtype=np.int64)
        valid = np.zeros((len(crossing), widest), dtype=bool)
        for k, found in enumerate(crossing):
            pairs[k, : found.size] = found
            valid[k, : found.size] = True
        self.band_pairs = pairs
        self.band_valid = valid
        self.boundary_rows = boundaries[None, :]

    def _rule(self, share: int) -> StoppingRule:
        rule = self._rules.get(share)
        if rule is None:
            rule = self._rules[share] = self._field.rule_for(share)
        return rule

    def _thresholds(
        self, information: FloatArray, shares: IntArray, shape: FloatArray | None
    ) -> FloatArray:
        if shape is not None:
            if self._constants is None:
                self._constants = np.array(
                    [
                        _constant(self._rule(max(share, 1)))
                        for share in range(self._size)
                    ]
                )
            return self._constants[np.clip(shares, 0, self._size - 1)][:, None] * shape
        result = np.empty_like(information)
        for share in np.unique(shares).tolist():
            rows = shares == share
            result[rows] = self._rule(max(int(share), 1)).thresholds(information[rows])
        return result

    def run(
        self,
        state: _State,
        active: IntArray,
        sums: FloatArray,
        trials: FloatArray,
        predictive: FloatArray,
    ) -> BoolArray:
        """Look at the active runs; returns which models need trials."""
        field, outcomes = self._field, self._field.outcomes[0]
        first, second = self.first, self.second
        width = float(outcomes.categories)
        prior = outcomes.prior_information
        weight_sum = width / 2.0  # sum of k / C over k = 0..C
        mu = (sums + weight_sum) / (trials + width)
        variance = predictive / (field.question_count * (trials + prior))

        order = np.argsort(state.segments[active] * 4.0 - mu, axis=1, kind="stable")
        mu_o = np.take_along_axis(mu, order, 1)
        var_o = np.take_along_axis(variance, order, 1)
        pred_o = np.take_along_axis(predictive, order, 1)
        n_o = np.take_along_axis(trials, order, 1)
        seg_o = np.take_along_axis(state.segments[active], order, 1)
        done_o = np.take_along_axis(state.done[active], order, 1)
        linked_o = state.linked[active[:, None], order[:, first], order[:, second]]
        drawable = (n_o < field.cap - 1e-9) & ~done_o

        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.abs(mu_o[:, first] - mu_o[:, second]) / np.sqrt(
                var_o[:, first] + var_o[:, second]
            )
            weighted = pred_o / (n_o + prior)
            information = (pred_o[:, first] + pred_o[:, second]) / (
                weighted[:, first] + weighted[:, second]
            ) - prior
        information = np.where(
            np.isfinite(information), np.maximum(information, 0.0), 0.0
        )
        complete: BoolArray = np.asarray((n_o > 0).all(axis=1))

        cut: BoolArray = np.asarray(seg_o[:, 1:] != seg_o[:, :-1])
        spanned = self._cross_count(linked_o) > 0
        shares = (self.claims & ~cut).sum(axis=1)
        shape = self._shape(information)
        while True:
            thresholds = self._thresholds(information, shares, shape)
            settled = (information > 0.0) & (z >= thresholds)
            same = seg_o[:, first] == seg_o[:, second]
            pending = self._cross_count(~settled & same)
            resolve = complete[:, None] & self.claims & ~cut & ~spanned & (pending == 0)
            if not resolve.any():
                break
            cut |= resolve
            seg_o[:, 1:] += np.cumsum(resolve, axis=1)
            shares = shares - resolve.sum(axis=1)

        with np.errstate(invalid="ignore"):
            margin = np.where(np.isfinite(thresholds), z - thresholds, -np.inf)
        informed = np.minimum(n_o[:, first], n_o[:, second])
        futile = ~settled & self._hopeful.futile(z, informed)
        links = _Links(self, margin, futile, same, drawable, complete, cut, spanned)
        needs_o = links.needs
        # Links made in a look change which later boundaries are open: the
        # runs with one are replayed boundary by boundary, in order.
        spanned = links.spanned.copy()
        for at in np.flatnonzero(links.any_link).tolist():
            needs_o[at], spanned[at] = self._replay(
                state, int(active[at]), order[at], links, at
            )
        open_targets = links.opened & ~spanned
        # A model is quiet when no open target boundary lies in its segment.
        inside = open_targets[:, None, :] & (seg_o[:, None, :-1] == seg_o[:, :, None])
        quiet = ~inside.any(axis=2)
        done_o |= complete[:, None] & ~needs_o & (n_o > 0) & (quiet | ~drawable)
        needs = np.zeros_like(needs_o)
        np.put_along_axis(needs, order, needs_o, axis=1)
        done = np.zeros_like(done_o)
        np.put_along_axis(done, order, done_o, axis=1)
        new_segments = np.zeros_like(seg_o)
        np.put_along_axis(new_segments, order, seg_o, axis=1)
        state.done[active] = done
        state.segments[active] = new_segments
        return needs

    def _replay(
        self,
        state: _State,
        run: int,
        order: IntArray,
        links: _Links,
        at: int,
    ) -> tuple[BoolArray, BoolArray]:
        """One run's links and needs, boundary by boundary (after a link)."""
        size = self._size
        needs = np.zeros(size, dtype=bool)
        spanned = links.spanned[at].copy()
        links.opened[at] = False
        for k in range(size - 1):
            if not links.candidate[at, k] or spanned[k]:
                continue
            i, j = int(links.weak_i[at, k]), int(links.weak_j[at, k])
            if links.futile_any[at, k] or links.stuck[at, k]:
                if links.futile_any[at, k]:
                    i, j = int(links.futile_i[at, k]), int(links.futile_j[at, k])
                state.linked[run, order[i], order[j]] = True
                state.linked[run, order[j], order[i]] = True
                spanned[i:j] = True
                continue
            needs[i] |= links.drawable[at, i]
            needs[j] |= links.drawable[at, j]
            links.opened[at, k] = True
        return needs, spanned

    def _shape(self, information: FloatArray) -> FloatArray | None:
        """``(t / T)^(delta - 1/2)`` when every share's rule is that shape."""
        rule = self._rule(1)
        if not isinstance(rule, SequentialRule):
            return None
        fraction = np.minimum(information / rule.budget, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = fraction ** (rule.delta - 0.5)
        return np.where(information > 0.0, values, np.inf)

    def _cross_count(self, pairs: BoolArray) -> NDArray[np.float32]:
        """Per boundary ``k``: the pairs (set in ``pairs``) across it."""
        return np.asarray(pairs.astype(np.float32) @ self._across, dtype=np.float32)


class _Links:
    """Every open claim's weakest pair, futile pair and fate, all at once.

    Assumes no link is made in the look; the runs where one is (``any_link``)
    are replayed by :meth:`_Look._replay`. Pairs are positions in the order.
    """

    def __init__(
        self,
        look: _Look,
        margin: FloatArray,
        futile: BoolArray,
        same: BoolArray,
        drawable: BoolArray,
        complete: BoolArray,
        cut: BoolArray,
        spanned: BoolArray,
    ) -> None:
        count, size = drawable.shape
        self.drawable = drawable
        self.spanned = spanned
        self.candidate = complete[:, None] & look.claims & ~cut & ~spanned
        # Sought only where a claim is open: (run, boundary) cells.
        at_run, at_k = np.nonzero(self.candidate)
        pairs = look.band_pairs[at_k]  # cells x pairs across: pair index
        # (run, pair) cells as flat indices: take() on them is much faster
        # than indexing with two index arrays.
        flat = at_run[:, None] * margin.shape[1] + pairs
        block = look.band_valid[at_k] & same.ravel().take(flat)
        cell_margin = margin.ravel().take(flat)
        cells = np.arange(at_k.size)
        weakest = np.zeros((count, size - 1), dtype=np.int64)
        weakest[at_run, at_k] = pairs[
            cells, np.where(block, cell_margin, np.inf).argmin(axis=1)
        ]
        self.weak_i, self.weak_j = look.first[weakest], look.second[weakest]
        futile_block = block & futile.ravel().take(flat)
        self.futile_any = np.zeros((count, size - 1), dtype=bool)
        self.futile_any[at_run, at_k] = futile_block.any(axis=1)
        chosen = np.zeros((count, size - 1), dtype=np.int64)
        chosen[at_run, at_k] = pairs[
            cells, np.where(futile_block, cell_margin, np.inf).argmin(axis=1)
        ]
        self.futile_i, self.futile_j = look.first[chosen], look.second[chosen]
        rows = np.arange(count)[:, None]
        self.stuck = (
            ~drawable[rows, self.weak_i] & ~drawable[rows, self.weak_j]
        ) & self.candidate
        linking = self.futile_any | self.stuck
        self.any_link = linking.any(axis=1)
        self.opened = self.candidate & ~linking
        needs = np.zeros((count, size), dtype=bool)
        open_rows, open_k = np.nonzero(self.opened)
        for side in (self.weak_i, self.weak_j):
            models = side[open_rows, open_k]
            needs[open_rows, models] |= drawable[open_rows, models]
        self.needs = needs


def _constant(rule: StoppingRule) -> float:
    if not isinstance(rule, SequentialRule):
        raise TypeError(f"expected the sequential rule; got {rule.name}")
    return rule.constant


def _argmin_pair(values: FloatArray, size: int) -> tuple[IntArray, IntArray]:
    flat = values.reshape(values.shape[0], -1).argmin(axis=1)
    return flat // size, flat % size


def truth_order(means: Sequence[float]) -> list[int]:
    """Model indices from the best true mean down (ties by index)."""
    return sorted(range(len(means)), key=lambda index: (-means[index], index))
