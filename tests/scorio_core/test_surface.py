"""scorio_core offers scorio.eval's public functions with the same signatures."""

from __future__ import annotations

import inspect

import pytest
import scorio.eval as oracle

import scorio_core

COVERED = sorted(oracle.__all__)


def test_every_public_name_of_scorio_eval_is_there() -> None:
    assert set(oracle.__all__) <= set(scorio_core.__all__)


@pytest.mark.parametrize("name", COVERED)
def test_names_kinds_and_defaults_of_the_parameters_match(name: str) -> None:
    ours = inspect.signature(getattr(scorio_core, name)).parameters
    theirs = inspect.signature(getattr(oracle, name)).parameters
    assert list(ours) == list(theirs)
    for parameter in theirs:
        assert ours[parameter].kind == theirs[parameter].kind, parameter
        assert ours[parameter].default == theirs[parameter].default, parameter


@pytest.mark.parametrize(
    ("alias", "target"),
    [("unanimous_at_k", "pass_hat_k"), ("unanimous_at_k_ci", "pass_hat_k_ci")],
)
def test_the_aliases_are_the_same_functions(alias: str, target: str) -> None:
    assert getattr(scorio_core, alias) is getattr(scorio_core, target)
