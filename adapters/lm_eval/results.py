"""lm-eval's results files and file names: which results go with which samples.

``results_<date>.json`` holds per task ``"<metric>,<filter>"`` aggregates
(their standard errors may be the string ``"N/A"``), the model's name and
each task's resolved config (filters, metric options, repeats). Samples files
are named ``samples_<task>_<date>.jsonl``, where ``<date>`` is the run's
``datetime.isoformat()`` with ``:`` replaced by ``-`` (no underscore), shared
by every file of one run; lm-eval 0.4.0-0.4.2 wrote ``results.json`` and
``<model args>_<task>.jsonl`` instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TaskScore:
    """One aggregate of a results file: ``"<metric>,<filter>"`` of a task."""

    task: str
    metric: str
    filter: str
    value: float | None
    stderr: float | None


@dataclass(frozen=True, slots=True)
class LmEvalResults:
    """What a results file says about its run."""

    model_name: str | None
    configs: Mapping[str, Mapping[str, object]]
    scores: tuple[TaskScore, ...]
    # The run's --model_args, as given (keys only matter here).
    model_args: Mapping[str, object] | None = None

    @property
    def names_its_model(self) -> bool:
        """Whether ``model_name`` came from the user's model args.

        lm-eval takes the model's name from ``pretrained=`` (or ``peft=``,
        ``delta=``, ``model=``, ``path=``, ``engine=``); without any of them
        it makes one up (eight random letters). Files without the run's
        config say nothing: they are taken to name it.
        """
        if self.model_args is None:
            return True
        return any(key in self.model_args for key in _NAMING_ARGS)

    def score(self, task: str, metric: str, filter: str) -> TaskScore | None:
        """The aggregate of ``metric`` under ``filter`` for ``task``, if logged."""
        return next(
            (
                score
                for score in self.scores
                if (score.task, score.metric, score.filter) == (task, metric, filter)
            ),
            None,
        )


def read_results(path: Path) -> LmEvalResults:
    """Read a results file; a value or standard error of ``"N/A"`` becomes None.

    Raises:
        OSError: when the file cannot be read.
        ValueError: when it is not a JSON object.
    """
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise ValueError(f"{path} is not a JSON object")
    scores = []
    for task, entries in _table(document.get("results")).items():
        for key, value in _table(entries).items():
            metric, comma, filter_name = key.rpartition(",")
            if not comma or metric.endswith("_stderr"):
                continue
            stderr = _table(entries).get(f"{metric}_stderr,{filter_name}")
            scores.append(
                TaskScore(task, metric, filter_name, _real(value), _real(stderr))
            )
    model_name = document.get("model_name")
    run_config = _table(document.get("config"))
    model_args = _model_args(run_config.get("model_args")) if run_config else None
    return LmEvalResults(
        model_name=model_name if isinstance(model_name, str) and model_name else None,
        configs={
            task: config
            for task, config in _table(document.get("configs")).items()
            if isinstance(config, dict)
        },
        scores=tuple(scores),
        model_args=model_args,
    )


def name_parts(path: Path) -> tuple[str, str | None]:
    """(task, date) of ``samples_<task>_<date>.jsonl``; (stem, None) otherwise."""
    stem = path.name.split(".json")[0]
    rest = stem.removeprefix("samples_")
    if rest != stem and "_" in rest:
        task, _, date = rest.rpartition("_")
        return task, date
    return stem, None


def results_path(samples: Path, date: str | None) -> Path | None:
    """The results file written with a samples file, if there is one."""
    folder = samples.parent
    if date is None:
        legacy = folder / "results.json"
        return legacy if legacy.is_file() else None
    exact = folder / f"results_{date}.json"
    if exact.is_file():
        return exact
    # --output_path NAME.json names the results file NAME_<date>.json.
    others = sorted(
        path
        for path in folder.glob(f"*_{date}.json")
        if not path.name.startswith("samples_")
    )
    return others[0] if others else None


_NAMING_ARGS = ("pretrained", "peft", "delta", "model", "path", "engine")


def _model_args(value: object) -> dict[str, object]:
    """``--model_args`` as logged: a dict, or the ``k=v,k=v`` string."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        pairs = (part.partition("=") for part in value.split(",") if part.strip())
        return {key.strip(): text for key, _, text in pairs}
    return {}


def _table(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _real(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
