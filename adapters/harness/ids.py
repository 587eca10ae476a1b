"""Trial ids a harness makes: one eval id per eval, an attempt per trial."""

from __future__ import annotations

import secrets


def new_eval_id() -> str:
    """A fresh eval id (22 URL-safe characters), made once per eval."""
    return secrets.token_urlsafe(16)


def attempt_id(eval_id: str, index: int | str) -> str:
    """The trial id of attempt ``index`` of a question in eval ``eval_id``.

    Examples:
        >>> attempt_id("run-7", 3)
        'run-7:3'
    """
    return f"{eval_id}:{index}"
