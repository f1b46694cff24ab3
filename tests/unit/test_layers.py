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


def test_every_module_is_in_a_layer():
    # A module outside the layers is outside the contract: nothing would stop it importing
    # upward. The migrations (Django's) and the non-Python folders are not layered.
    import tomllib

    import awa_django

    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in config if c["type"] == "layers")["layers"]
    named = {part.strip() for layer in layers for part in layer.replace(":", "|").split("|")}
    package = Path(awa_django.__file__).parent
    children = {
        path.stem if path.is_file() else path.name
        for path in package.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__")
        or (path.is_dir() and (path / "__init__.py").exists())
    } - {"migrations"}
    assert children - named == set()
    assert named - children == set()
