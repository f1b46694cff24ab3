"""The import graph of awa_django runs one way: the contracts in pyproject.toml
(``[tool.importlinter]``), function-level imports included, as CONTRIBUTING.md describes."""

from __future__ import annotations

from pathlib import Path

from importlinter.cli import lint_imports

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_no_upward_or_circular_import():
    # The report names each broken contract and the import chain that breaks it.
    assert lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True) == 0
