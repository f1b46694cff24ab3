"""The built sdist and wheel, once per session for the tests that read or install them."""

from __future__ import annotations

import pytest

from tests.deployment.dists import Dists, build_dists


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    return build_dists(tmp_path_factory.mktemp("dists"))
