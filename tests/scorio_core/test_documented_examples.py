"""scorio.eval's documented examples, run on scorio_core's functions.

Each covered function's docstring examples are taken from scorio 0.2.3 as
written and executed with scorio_core's function of the same name in place
of scorio's: the values its documentation prints must come out.
"""

from __future__ import annotations

import doctest

import pytest
import scorio.eval as oracle

import scorio_core

DOCUMENTED = sorted(
    name
    for name in oracle.__all__
    if any(
        test.examples for test in doctest.DocTestFinder().find(getattr(oracle, name))
    )
)


def test_scorio_documents_examples_for_most_functions() -> None:
    assert len(DOCUMENTED) >= 20


@pytest.mark.parametrize("name", DOCUMENTED)
def test_the_documented_example_gives_the_documented_values(name: str) -> None:
    namespace: dict[str, object] = {
        item: getattr(scorio_core, item) for item in scorio_core.__all__
    }
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder().find(getattr(oracle, name), name):
        test.globs = dict(namespace)
        for example in test.examples:
            # tailpass's example calls eval.tailpass after `from scorio import eval`.
            example.source = example.source.replace(
                "from scorio import eval", "import scorio_core as eval"
            )
        result = runner.run(test, out=lambda text: None)
        assert result.attempted > 0
        assert result.failed == 0, name
