"""Headless Chromium (Debian's, through its chromedriver) for the browser tests, and the
directories their screenshots go to: artifacts/browser/<python>-<django>/<test module>/ at the
repository root (gitignored), emptied once per run. The interpreter and Django versions keep
apart two runs at once on one checkout (CI runs its Python 3.12 / Django 6 leg beside the
default one)."""

from __future__ import annotations

import platform
import shutil
from collections.abc import Iterator
from pathlib import Path

import django
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from tests.conftest import REPO_ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = (
    REPO_ROOT
    / "artifacts"
    / "browser"
    / f"py{platform.python_version()}-django{django.get_version()}"
)
# The flags this machine needs: no sandbox (root in a container), no GPU, and nothing that
# phones home (QUIC, component updates, sync, background networking).
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    return ARTIFACTS


@pytest.fixture
def screenshots(
    artifacts: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> Iterator[Path]:
    """Where a test saves its screenshots: a directory named after its module, under
    ``artifacts``, so a test can check exactly which screenshots it took."""
    directory = artifacts / request.module.__name__.rsplit(".", 1)[-1]
    directory.mkdir(exist_ok=True)
    yield directory
    with capsys.disabled():  # shown even when pytest captures output
        print(f"\nbrowser screenshots saved in {directory}")
