"""The wire contract: trial events, run configs, statuses and next-trial plans.

Field names are the contract (docs/events.md, docs/status.md) shared by the CLI's
``--json``, the HTTP API and MQTT. Question and trial ids may arrive as
strings or integers; both become strings, so ``3`` and ``"3"`` name the same
trial. The trial event and its cost are msgspec structs
(:mod:`monitor.trial_event`), re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Annotated, Final, Literal, Self, get_args
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    TypeAdapter,
    field_validator,
    model_validator,
)

from monitor.limits import MAX_ID_LENGTH, MAX_QUESTION_COUNT
from monitor.rubrics import RUBRICS
from monitor.trial_event import TS_EXPECTED as TS_EXPECTED
from monitor.trial_event import Cost as Cost
from monitor.trial_event import TrialEvent as TrialEvent
from monitor.trial_event import is_time as is_time
from scorio_core.count_metrics import MetricSpec


def _id_text(value: object) -> object:
    """Accept a string or an integer id (not a bool or float) as a string."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


Identifier = Annotated[
    StrictStr, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=r"^[^\x00-\x1f]*$")
]
LooseIdentifier = Annotated[Identifier, BeforeValidator(_id_text)]


RuleName = Literal["sequential", "paper"]
TargetName = Literal["ranking", "top_k", "leader", "width"]
ErrorControl = Literal["ranking", "pair"]
DecisionKind = Literal["resolved", "unresolvable", "equivalent"]


class RunConfig(BaseModel):
    """A run's declaration (TOML top-level keys or a ``[[runs]]`` table).

    With ``questions``, an event naming another question is rejected; with
    ``question_count``, ids are free but a distinct id beyond the count is
    rejected; with neither, the run is open (``M`` = questions seen).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    run: Identifier
    weights: list[float] = Field(default_factory=lambda: [0.0, 1.0], min_length=2)
    labels: list[str] | None = None
    rubric: str | None = None
    thresholds: dict[str, float] = Field(default_factory=dict)
    questions: (
        Annotated[list[LooseIdentifier], Field(max_length=MAX_QUESTION_COUNT)] | None
    ) = None
    question_count: Annotated[StrictInt, Field(ge=1, le=MAX_QUESTION_COUNT)] | None = (
        None
    )
    models: list[Identifier] | None = None
    confidence: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.95
    rule: RuleName = "sequential"
    error_control: ErrorControl = "ranking"
    equivalence_margin: Annotated[float, Field(gt=0.0)] | None = None
    target: TargetName = "ranking"
    top_k: Annotated[StrictInt, Field(ge=1)] | None = None
    interval_width: Annotated[float, Field(gt=0.0)] | None = None
    min_trials_per_question: Annotated[StrictInt, Field(ge=0)] = 0
    max_trials_per_question: Annotated[StrictInt, Field(ge=1)] | None = None
    webhooks: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(
        default_factory=list
    )
    # Live metrics beside Bayes@N, e.g. ["pass@4", "maj@5"] (count_metrics syntax).
    metrics: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _rubric_defaults(cls, data: object) -> object:
        """A rubric's weights and labels unless the config gives its own."""
        if not isinstance(data, dict) or data.get("rubric") is None:
            return data
        rubric = RUBRICS.get(str(data["rubric"]))
        if rubric is None:
            raise ValueError(
                f"unknown rubric {data['rubric']!r}; known: {', '.join(RUBRICS)}"
            )
        data = dict(data)
        data.setdefault("weights", list(rubric.weights))
        if len(data["weights"]) == rubric.category_count:
            data.setdefault("labels", list(rubric.labels))
        return data

    @field_validator("weights")
    @classmethod
    def _finite_weights(cls, weights: list[float]) -> list[float]:
        if not all(math.isfinite(w) for w in weights):
            raise ValueError(f"weights must be finite numbers; got {weights}")
        return weights

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.questions is not None and self.question_count is not None:
            raise ValueError("give questions or question_count, not both")
        if self.questions is not None and len(set(self.questions)) != len(
            self.questions
        ):
            raise ValueError("questions must be distinct")
        if self.labels is not None and len(self.labels) != len(self.weights):
            raise ValueError(
                f"labels must name every category: {len(self.weights)} weights, "
                f"{len(self.labels)} labels"
            )
        if self.rubric is not None:
            rubric = RUBRICS[self.rubric]
            if len(self.weights) != rubric.category_count:
                raise ValueError(
                    f"rubric {self.rubric} has {rubric.category_count} categories; "
                    f"got {len(self.weights)} weights"
                )
            rubric.check_thresholds(self.thresholds)
        elif self.thresholds:
            raise ValueError("thresholds need a rubric")
        for text in self.metrics:
            spec = MetricSpec.parse(text)
            if spec.is_binary and len(self.weights) != 2:
                raise ValueError(
                    f"metric {text!r} needs binary outcomes; the run has "
                    f"{len(self.weights)} categories"
                )
        if len(set(self.metrics)) != len(self.metrics):
            raise ValueError("metrics must be distinct")
        if self.models is not None and len(set(self.models)) != len(self.models):
            raise ValueError("models must be distinct")
        if self.target == "top_k" and self.top_k is None:
            raise ValueError("target top_k needs top_k = <number of models>")
        if self.target == "width" and self.interval_width is None:
            raise ValueError(
                "target width needs interval_width = <credible interval width>"
            )
        if (
            self.max_trials_per_question is not None
            and self.min_trials_per_question > self.max_trials_per_question
        ):
            raise ValueError("min_trials_per_question exceeds max_trials_per_question")
        return self

    def redacted(self) -> RunConfig:
        """This config with its webhook URLs cut to scheme and host.

        A webhook URL is a secret (a Slack URL lets anyone post): read
        routes and logs show this form.
        """
        if not self.webhooks:
            return self
        return self.model_copy(
            update={"webhooks": [redacted_url(url) for url in self.webhooks]}
        )

    @property
    def declared_question_count(self) -> int | None:
        """``M`` when declared (by list or count), ``None`` for an open run."""
        if self.questions is not None:
            return len(self.questions)
        return self.question_count


class MetricValue(BaseModel):
    """A live metric of one model: posterior mean, sd and credible interval."""

    mu: float
    sigma: float
    lo: float
    hi: float


def redacted_url(url: str) -> str:
    """A URL without its credentials, path or query: ``https://host/...``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "(a URL, redacted)"
    return f"{parts.scheme}://{host}{port}/..."


class ModelStatus(BaseModel):
    """One model's standing in a run.

    ``group`` separates models only where every pair across the boundary is
    settled (block grouping, what decisions use); null for a model that
    joined after a boundary settled and is not yet placed by its own tests
    (no order is claimed over it); ``adjacent_group`` is the
    paper's Table 1 grouping (neighbours with ``z < Phi^-1(confidence)``
    share a group), for display. ``predicted_trials`` is the forecast of
    trials this model still needs (0: none; null: no forecast possible).
    ``budget_exhausted``: the model is on an unsettled boundary but has used
    its ``max_trials_per_question`` everywhere. ``avg`` is avg@N, the raw
    mean observed score (a harness's own accuracy), beside ``mu``; null
    before the model's first observed trial.
    """

    model: str
    mu: float
    avg: float | None = None
    sigma: float
    lo: float
    hi: float
    trials: int
    rank: int
    group: int | None
    adjacent_group: int
    needs_trials: bool
    predicted_trials: int | None
    budget_exhausted: bool = False
    # Reported cost totals (trials that carried "cost"): tokens and seconds.
    cost_tokens: int = 0
    cost_seconds: float = 0.0
    # "avg" and the run's ``metrics``, keyed by the name as the run wrote it.
    metrics: dict[str, MetricValue] = Field(default_factory=dict)


class Decision(BaseModel):
    """A settled decision: final once made, whatever later trials show.

    ``kind``: ``resolved`` (``a`` above ``b``, and the whole boundary between
    them: every model of ``above`` is claimed better than every model of
    ``below``), ``unresolvable`` (a statistical tie at this budget) or
    ``equivalent`` (closer than the run's ``equivalence_margin``). ``z``,
    ``trials`` (the run's trials) and ``look`` are from when it was made.
    ``joiner``: the model whose placement this resolved decision records
    (one that joined after a boundary settled); ``above`` or ``below`` is
    then that model alone.
    """

    kind: DecisionKind
    a: str
    b: str
    z: float
    trials: int
    look: int
    above: list[str] = Field(default_factory=list)
    below: list[str] = Field(default_factory=list)
    joiner: str | None = None


class PairStatus(BaseModel):
    """Two models adjacent in the current order (``a`` above ``b``).

    ``z`` is the current one; ``threshold`` the z the pair must reach now to
    settle (``None``: no trials yet). ``decision`` is the settled decision
    that closes the boundary between them, if any, with when it was made.
    ``predicted_trials``: forecast trials (both models of the boundary's
    weakest pair) until the boundary ends, however it ends; 0 when settled.
    """

    a: str
    b: str
    z: float
    rho: float
    resolved: bool
    unresolvable: bool
    predicted_trials: int | None
    equivalent: bool = False
    threshold: float | None = None
    decision: Decision | None = None


WaitingReason = Literal["models", "questions", "in_flight", "budget", "decisions"]


class Waiting(BaseModel):
    """Why ``next`` hands out no trials (to the run, or to ``models``) now.

    ``reason``: ``models`` (too few models have reported to compare any:
    report each once, declare the run's models, or ask ``next`` for a
    model by name), ``questions`` (the room left is on questions the run
    has not seen, which a plan cannot name), ``in_flight`` (every trial
    left below the cap is reserved by earlier plans, until they are
    reported or the first lease expires at ``until``, seconds since the
    epoch), ``budget`` (the models on open boundaries have used
    ``max_trials_per_question``) or ``decisions`` (the stopping rule asks
    no model for trials while some order is open). ``message`` says it in
    a sentence; ``models`` names the models concerned.
    """

    reason: WaitingReason
    message: str
    models: list[str] = Field(default_factory=list)
    until: float | None = None


class Status(BaseModel):
    """A run's status: what the CLI prints, HTTP serves and MQTT publishes.

    ``waiting_for`` is empty while ``next`` hands out trials to every model
    that needs them, and when the run is stable; otherwise it says why not.
    """

    run: str
    rule: RuleName
    error_control: ErrorControl = "ranking"
    confidence: float
    stable: bool
    trials: int
    duplicates: int
    corrections: int
    rejected: int
    # Prior outcomes (the paper's R0) are evidence, not trials: counted here,
    # never in ``trials`` or against a budget.
    prior_trials: int = 0
    question_count: int
    # The run's budget per model and question; None: no budget, so a forecast
    # of trials needed has nothing to be held against.
    max_trials_per_question: int | None = None
    open: bool
    budget_exhausted: bool = False
    models: list[ModelStatus]
    pairs: list[PairStatus]
    decisions: list[Decision] = Field(default_factory=list)
    waiting_for: list[Waiting] = Field(default_factory=list)


class NextItem(BaseModel):
    """Run ``trials`` more trials of ``model`` on ``question``: a reservation.

    ``lease`` names the plan that reserved them and ``expires`` (seconds
    since the epoch) says until when: until then, or until they are
    reported, they count as in flight in every later plan. Both are
    ``None`` for a plan that reserved nothing (a look ahead).
    """

    model: str
    question: str
    trials: int
    lease: str | None = None
    expires: float | None = None


class Plan(list[NextItem]):
    """What ``next`` answers: its reservations (a list), and why not more.

    When the plan holds fewer trials than asked for, ``waiting_for`` is the
    run's :attr:`Status.waiting_for` after it (for a plan of one model, the
    reasons naming it), saying why not more; ``stable`` whether the run is
    stable (then no trials are needed at all).
    """

    def __init__(
        self,
        items: Iterable[NextItem] = (),
        waiting_for: Iterable[Waiting] = (),
        *,
        stable: bool = False,
    ) -> None:
        super().__init__(items)
        self.waiting_for = list(waiting_for)
        self.stable = stable

    def why_empty(self) -> str:
        """Why the plan holds no more trials, in sentences (empty if unknown)."""
        if self.stable:
            return "the run is stable: no trials needed"
        return " ".join(item.message for item in self.waiting_for)


# The HTTP answer of ``next`` is the list of reservations; why not more goes
# in these headers (JSON), each model list cut to its first HEADER_MODELS.
WAITING_HEADER: Final = "Scorio-Waiting-For"
STABLE_HEADER: Final = "Scorio-Stable"
HEADER_MODELS: Final = 20
_WAITING_LIST = TypeAdapter(list[Waiting])


def plan_headers(items: list[NextItem]) -> dict[str, str]:
    """The headers that carry a :class:`Plan`'s ``waiting_for`` and ``stable``."""
    if not isinstance(items, Plan):
        return {}
    waiting = [
        item.model_copy(update={"models": item.models[:HEADER_MODELS]})
        for item in items.waiting_for
    ]
    return {
        WAITING_HEADER: _WAITING_LIST.dump_json(waiting).decode("ascii"),
        STABLE_HEADER: "true" if items.stable else "false",
    }


def plan_from(items: list[NextItem], headers: Mapping[str, str]) -> Plan:
    """The :class:`Plan` an HTTP answer of ``next`` carries (headers optional)."""
    waiting = headers.get(WAITING_HEADER)
    return Plan(
        items,
        [] if waiting is None else _WAITING_LIST.validate_json(waiting),
        stable=headers.get(STABLE_HEADER) == "true",
    )


RejectionKind = Literal[
    "too_large",
    "invalid_json",
    "invalid_event",
    "unknown_run",
    "run_mismatch",
    "undeclared",
    "category",
    "signals",
]
# Every kind, e.g. to show each rejection counter at 0 before the first one.
REJECTION_KINDS: tuple[RejectionKind, ...] = get_args(RejectionKind)


class Rejection(BaseModel):
    """An input that was not counted, and why; ``run`` when it named one.

    ``kind`` is a small fixed vocabulary (for metrics labels); ``reason`` is
    the sentence a user reads.
    """

    reason: str
    kind: RejectionKind = "invalid_event"
    source: str = ""
    position: int | None = None
    raw: str = ""
    run: str | None = None
