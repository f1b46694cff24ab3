"""The version is written once, in awa_django.__version__, and the build reads it from there."""

from __future__ import annotations

import tomllib
from importlib import metadata

import awa_django
from tests.fresh_project import ROOT


def test_the_distribution_version_is_the_package_version():
    assert metadata.version("awa-django") == awa_django.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
