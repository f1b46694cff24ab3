"""The built sdist and wheel carry every file of the package, not only its Python modules: an
editable install reads templates and SQL from the checkout and would hide a file they leave
out."""

from __future__ import annotations

import tarfile
import zipfile

from tests.deployment.dists import tracked


def package_files() -> set[str]:
    expected = set(tracked("awa_django"))
    assert any(name.endswith(".html") for name in expected), "the admin templates are tracked"
    assert any(name.endswith(".sql") for name in expected), "the SQL files are tracked"
    assert "awa_django/static/awa_django/live_refresh.js" in expected, "the static files too"
    return expected


def test_the_sdist_holds_every_file_of_the_package(dists):
    with tarfile.open(dists.sdist) as archive:
        # Members are named under the sdist's top directory, awa_django-VERSION/.
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert sorted(package_files() - in_sdist) == []


def test_the_wheel_holds_every_file_of_the_package(dists):
    with zipfile.ZipFile(dists.wheel) as archive:
        in_wheel = set(archive.namelist())
    assert sorted(package_files() - in_wheel) == []
