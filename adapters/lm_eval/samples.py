"""lm-eval ``--log_samples`` files as trial items, read once or followed.

A samples file holds one JSON line per (document, filter), and every filter's
line repeats the document's generations ``resps``, so only the lines of one
filter are read and each document counts once. Each document becomes trials
of run ``<task>``, model ``model_name`` from the results file (else the
samples file's folder, which lm-eval names after the model) and question
``doc_id`` (``<task>:<doc_id>`` when the options name another run, so the
tasks of a group can share one run):

- by default one trial per document whose category is the logged
  metric (``exact_match``, ``acc``: 0 or 1) of the task's first filter
  (``none`` when it has none); a filter whose value combines several
  generations (``maj@k``, a keep-all ``take_first_k``) is read only when
  named, and fractions only through a :class:`CategoryMap`;
- with ``repeats``, one trial per generation in ``resps[0]`` (the trial is
  its position), re-scored by :mod:`adapters.lm_eval.rescoring` and checked
  against the logged value; tasks with one generation per document
  (multiple choice) keep the logged metric.

A trial is one attempt: its id is ``<date>:<repeat>``, the date of the run
that wrote the file (the ``<date>`` of ``samples_<task>_<date>.jsonl`` and
``results_<date>.json``, new for every lm-eval run) and the generation's
position (``0`` without repeats). Two runs into one output directory so add
up, while reading the same files again counts nothing twice. Legacy files
(lm-eval 0.4.0-0.4.2, no date in the name) keep the bare position.

A ``--predict_only`` run logs no scores and replaces the task's metrics
with ``bypass``: multiple-choice tasks are scored as lm-eval scores ``acc``
(the gold choice has the highest logged log-likelihood); other tasks are
refused, saying that the task's metric and options are missing. A model
name lm-eval made up (no ``pretrained=`` or other naming model arg) is
refused with a hint to name the model.

A line that cannot be read becomes a :class:`Rejection` naming the file and
line (a sample number in legacy files, which are one JSON array).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

from adapters.lm_eval.records import LmEvalOptions
from adapters.lm_eval.samples_file import SamplesFile
from monitor.feeds.files import Item, ItemBatch


class LmEvalSamples:
    """Batches of trial items from lm-eval samples files.

    Args:
        path: One samples file, or an output directory searched recursively
            for ``samples_*.jsonl`` files.
        options: How samples become trials.
        follow: Keep reading new lines and new files until :meth:`stop`
            (lm-eval writes a task's file when the whole run ends).
        poll_interval_s: Wait between looks when following.
        batch_items: Most items per batch.
        sleep: Injectable sleep, for tests.
    """

    def __init__(
        self,
        path: Path,
        options: LmEvalOptions | None = None,
        *,
        follow: bool = False,
        poll_interval_s: float = 1.0,
        batch_items: int = 5000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._path = path
        self._options = options or LmEvalOptions()
        self._follow = follow
        self._poll_interval_s = poll_interval_s
        self._batch_items = batch_items
        self._sleep = sleep
        self._files: dict[Path, SamplesFile] = {}
        self._stopped = False

    @property
    def name(self) -> str:
        return f"lm-eval:{self._path.resolve()}"

    def stop(self) -> None:
        """Ask a following reader to finish after its current batch."""
        self._stopped = True

    def batches(self) -> Iterator[ItemBatch]:
        """Yield the items of every file, then (following) of new lines and files.

        Raises:
            ValueError: when not following and the path does not exist.
        """
        if not self._follow and not self._path.exists():
            raise ValueError(f"no such file or directory: {self._path}")
        while not self._stopped:
            for samples in self._discover():
                chunk: list[Item] = []
                for item in samples.read(final=not self._follow):
                    chunk.append(item)
                    if len(chunk) >= self._batch_items:
                        yield ItemBatch(str(samples.path), chunk)
                        chunk = []
                if chunk:
                    yield ItemBatch(str(samples.path), chunk)
                if self._stopped:
                    return
            if not self._follow:
                return
            self._sleep(self._poll_interval_s)

    def _discover(self) -> list[SamplesFile]:
        if self._path.is_dir():
            # lm-eval's own rule for samples files: "samples_" and ".json".
            paths = sorted(
                path
                for path in self._path.rglob("samples_*")
                if ".json" in path.name and path.is_file()
            )
        else:
            paths = [self._path] if self._path.is_file() else []
        for path in paths:
            if path not in self._files:
                self._files[path] = SamplesFile(path, self._options)
        return list(self._files.values())


def read_lm_eval(path: Path, options: LmEvalOptions | None = None) -> Iterator[Item]:
    """Every item of a samples file or output directory, read once."""
    for batch in LmEvalSamples(path, options).batches():
        yield from batch.items
