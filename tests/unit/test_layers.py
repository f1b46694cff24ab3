"""The import graph of awa_django runs one way: the contracts in pyproject.toml
(``[tool.importlinter]``), function-level imports included, as CONTRIBUTING.md describes."""

from __future__ import annotations

import logging
from pathlib import Path

from importlinter.cli import lint_imports

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_no_upward_or_circular_import():
    # import-linter configures logging as it starts, which disables every logger that already
    # exists: later tests read awa's log lines, so each logger is put back as it was.
    manager = logging.root.manager
    disabled = {
        name: logger.disabled
        for name, logger in manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    try:
        # The report names each broken contract and the import chain that breaks it.
        assert lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True) == 0
    finally:
        for name, was in disabled.items():
            manager.loggerDict[name].disabled = was  # type: ignore[union-attr]
