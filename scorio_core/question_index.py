"""Question ids numbered as rows, shareable by the count tables of one run.

Every model of a run has a :class:`~scorio_core.counts.CountTable` over the
same questions. Each table numbering them itself would keep, per model, a
dict and a list of every question plus an int object per row: 54 MB for
100 models x 10,000 questions (tracemalloc), more than their counts. Tables
built on one :class:`QuestionIndex` number each question once for all of
them; a question added through any of them is declared in all.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator


class QuestionIndex:
    """Append-only question -> row numbering (rows in first-added order)."""

    __slots__ = ("_questions", "_rows")

    def __init__(self, questions: Iterable[Hashable] = ()) -> None:
        self._rows: dict[Hashable, int] = {}
        self._questions: list[Hashable] = []
        for question in questions:
            self.add(question)

    def __len__(self) -> int:
        return len(self._questions)

    def __contains__(self, question: object) -> bool:
        return question in self._rows

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._questions)

    def add(self, question: Hashable) -> int:
        """The question's row, numbered next if it is new."""
        row = self._rows.get(question)
        if row is None:
            row = self._rows[question] = len(self._questions)
            self._questions.append(question)
        return row

    def row(self, question: Hashable) -> int | None:
        """The question's row, or None if it was never added."""
        return self._rows.get(question)

    @property
    def rows(self) -> dict[Hashable, int]:
        """The numbering itself (read it, never write it)."""
        return self._rows

    @property
    def questions(self) -> list[Hashable]:
        """Questions in row order (read it, never write it)."""
        return self._questions
