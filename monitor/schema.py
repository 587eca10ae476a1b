"""The wire contract: trial events, run configs, statuses and next-trial plans.

Field names follow DESIGN.md section 4 and are the contract shared by the CLI's
``--json``, the HTTP API and MQTT. Question and trial ids may arrive as
strings or integers; both become strings, so ``3`` and ``"3"`` name the same
trial.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from monitor.rubrics import RUBRICS

MAX_ID_LENGTH = 256
MAX_SIGNALS = 32


def _id_text(value: object) -> object:
    """Accept a string or an integer id (not a bool or float) as a string."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


Identifier = Annotated[
    StrictStr, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=r"^[^\x00-\x1f]*$")
]
LooseIdentifier = Annotated[Identifier, BeforeValidator(_id_text)]

SignalName = Annotated[StrictStr, Field(max_length=64, pattern=r"^[a-z][a-z0-9_]*$")]
SignalValue = StrictBool | StrictInt | StrictFloat | StrictStr | None

RuleName = Literal["sequential", "paper"]
TargetName = Literal["ranking", "top_k", "leader", "width"]


class Cost(BaseModel):
    """What one trial cost, for cost-aware allocation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: Annotated[StrictInt, Field(ge=0)] | None = None
    seconds: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] | None = None


class TrialEvent(BaseModel):
    """One finished trial: ``(run, model, question, trial)`` and its outcome.

    ``correct`` may stand for ``category`` in binary runs (true is 1);
    ``signals`` (is_correct, has_box, output_tokens, ...) may stand for it in
    runs with a ``rubric``, which classifies them at ingestion. A ``prior``
    outcome counts toward the prior (the paper's R0), not the data.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    run: Identifier
    model: Identifier
    question: LooseIdentifier
    trial: LooseIdentifier
    category: Annotated[StrictInt, Field(ge=0)] | None = None
    correct: StrictBool | None = None
    prior: StrictBool = False
    cost: Cost | None = None
    ts: Annotated[float, Field(allow_inf_nan=False)] | StrictStr | None = None
    signals: (
        Annotated[dict[SignalName, SignalValue], Field(max_length=MAX_SIGNALS)] | None
    ) = None

    @model_validator(mode="after")
    def _one_outcome(self) -> Self:
        if self.category is None and self.correct is None and self.signals is None:
            raise ValueError(
                "needs an outcome: category (an integer), correct (true/false) "
                "or signals (for a run with a rubric)"
            )
        if (
            self.category is not None
            and self.correct is not None
            and self.category != int(self.correct)
        ):
            raise ValueError("category and correct disagree")
        return self

    @property
    def outcome(self) -> int:
        """The category, with ``correct`` mapped to 1 (true) or 0 (false).

        Only signals: -1 until the run's rubric classified the event.
        """
        if self.category is not None:
            return self.category
        if self.correct is None:
            return -1
        return int(self.correct)


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
    questions: list[LooseIdentifier] | None = None
    question_count: Annotated[StrictInt, Field(ge=1)] | None = None
    models: list[Identifier] | None = None
    confidence: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.95
    rule: RuleName = "sequential"
    target: TargetName = "ranking"
    top_k: Annotated[StrictInt, Field(ge=1)] | None = None
    interval_width: Annotated[float, Field(gt=0.0)] | None = None
    min_trials_per_question: Annotated[StrictInt, Field(ge=0)] = 0
    max_trials_per_question: Annotated[StrictInt, Field(ge=1)] | None = None
    webhooks: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(
        default_factory=list
    )

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

    @property
    def declared_question_count(self) -> int | None:
        """``M`` when declared (by list or count), ``None`` for an open run."""
        if self.questions is not None:
            return len(self.questions)
        return self.question_count


class ModelStatus(BaseModel):
    """One model's standing in a run.

    ``group`` separates models only where every pair across the boundary is
    settled (block grouping, what decisions use); ``adjacent_group`` is the
    paper's Table 1 grouping (neighbours with ``z < Phi^-1(confidence)``
    share a group), for display. ``predicted_trials`` is the forecast of
    trials this model still needs (0: none; null: no forecast possible).
    ``budget_exhausted``: the model is on an unsettled boundary but has used
    its ``max_trials_per_question`` everywhere.
    """

    model: str
    mu: float
    sigma: float
    lo: float
    hi: float
    trials: int
    rank: int
    group: int
    adjacent_group: int
    needs_trials: bool
    predicted_trials: int | None
    budget_exhausted: bool = False


class PairStatus(BaseModel):
    """Two models adjacent in the current order (``a`` above ``b``).

    ``predicted_trials``: forecast trials (both models of the boundary's
    weakest pair) until the boundary between them settles; 0 when settled.
    """

    a: str
    b: str
    z: float
    rho: float
    resolved: bool
    unresolvable: bool
    predicted_trials: int | None


class Status(BaseModel):
    """A run's status: what the CLI prints, HTTP serves and MQTT publishes."""

    run: str
    rule: RuleName
    confidence: float
    stable: bool
    trials: int
    duplicates: int
    corrections: int
    rejected: int
    question_count: int
    open: bool
    budget_exhausted: bool = False
    models: list[ModelStatus]
    pairs: list[PairStatus]


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
