"""The live half of the operator console in a real browser: headless Chromium (as in
test_admin_browser) watches queue health and a Jobs search refresh themselves until jobs
enqueued meanwhile show in the counts, without a reload (and hold still while the search form
is being edited), then watches a real worker's running job on the runtimes page,
its progress bar advancing under the remembered refresh interval; a cron schedule is paused and
triggered from its page; a second worker's differing declaration shows as drift with both
values. Screenshots go to artifacts/browser/<python>-<django>/test_live_console/."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait

import awa_django as awa
from awa_django.ops import descriptors, queues, runtimes
from tests.admin.test_dlq import insert_entries
from tests.browser.test_admin_browser import WORKER_SETTINGS, seed_last_hour, wait_for
from tests.conftest import wait_until

# Progress reaches the database with the worker's heartbeat.
CONSOLE_SETTINGS = {**WORKER_SETTINGS, "HEARTBEAT_INTERVAL_S": 0.5, "HEARTBEAT_STALENESS_S": 30}
# Set in the page's window: a reload would lose it.
MARKER = "window.awaNotReloaded"


REDEPLOYED_DESCRIPTION = "Orders, payments and refunds"


def stored_description() -> str | None:
    """The default queue's description as its stored descriptor (the last publisher's) says."""
    return next((d.description for d in descriptors.queues() if d.queue == "default"), None)


def log_in(driver: WebDriver, base_url: str) -> None:
    User.objects.create_superuser("oncall", password="correct horse")
    driver.get(f"{base_url}/admin/login/?next=/admin/")
    driver.find_element(By.NAME, "username").send_keys("oncall")
    driver.find_element(By.NAME, "password").send_keys("correct horse")
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(driver, "#user-tools")


def until(driver: WebDriver, condition, timeout: float = 30.0):
    """Wait until ``condition(driver)`` is truthy and return it. A live refresh (or the page a
    form posts to) replaces elements at any moment: a condition that touched one after it was
    replaced is tried again at the next poll, with the elements found afresh."""
    waiting = WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,))
    return waiting.until(condition)


def read(driver: WebDriver, look):
    """``look(driver)``, taken while no element it reads is replaced (see ``until``)."""
    return until(driver, lambda d: [look(d)])[0]


def text_of(driver: WebDriver, element_id: str) -> str:
    return read(driver, lambda d: d.find_element(By.ID, element_id).text)


def text_becomes(driver: WebDriver, element_id: str, check, timeout: float = 30.0) -> str:
    """Wait until the text of ``#element_id`` passes ``check``, and return that text."""

    def passing(d: WebDriver) -> str | None:
        texts = [e.text for e in d.find_elements(By.ID, element_id)]
        return next((text for text in texts if check(text)), None)

    return until(driver, passing, timeout)


def available_on_email(driver: WebDriver) -> str:
    """The available count in queue email's health row."""
    return driver.find_element(By.CSS_SELECTOR, "#queue-email td.available").text


def progress_of(driver: WebDriver, job_id: int) -> int | None:
    bars = driver.find_elements(By.CSS_SELECTOR, f"#running-job-{job_id} progress")
    return int(bars[0].get_attribute("value")) if bars else None


def test_pages_refresh_in_place_and_show_a_running_jobs_progress(
    live_server, worker_process, browser: WebDriver, screenshots: Path
):
    worker_process(
        env={
            "AWA_OVERRIDES": json.dumps(CONSOLE_SETTINGS),
            "AWA_JOB_MODULES": "tests.jobs,tests.browser.handlers",
        }
    ).wait_ready()
    # The leader samples a queue once it has held a job.
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(3)])
    wait_until(lambda: len(queues.history("default")) >= 2, timeout=30)
    seed_last_hour("default")
    # Paused, so what is enqueued to it waits and the count it shows only grows.
    queues.pause("email", by="oncall")
    log_in(browser, live_server.url)

    browser.get(f"{live_server.url}/admin/awa_django/queue/?live=1")
    wait_for(browser, "#queue-health")
    control = browser.find_element(By.ID, "awa-live-refresh")
    assert control.is_displayed()  # hidden until the script runs
    assert "paused" in browser.find_element(By.ID, "queue-email").text
    Select(browser.find_element(By.ID, "awa-live-interval")).select_by_value("2")
    browser.execute_script(f"{MARKER} = true;")
    assert available_on_email(browser) == "0"

    awa.enqueue_many("tests.noop", [{"n": n} for n in range(3)], queue="email")

    until(browser, lambda d: available_on_email(d) == "3")
    assert browser.execute_script(f"return {MARKER} === true;")
    assert "updated" in control.text
    assert (
        browser.execute_script("return localStorage.getItem('awa_django.live_refresh_s');") == "2"
    )
    browser.save_screenshot(str(screenshots / "10-queue-health-live.png"))

    # The Jobs list searched by state keeps its count current the same way (the interval is
    # remembered), and holds still while the operator is typing into the search form.
    browser.get(f"{live_server.url}/admin/awa_django/job/?state=available&queue=email")
    wait_for(browser, "#state-count")
    browser.execute_script(f"{MARKER} = true;")
    assert text_of(browser, "state-count").startswith("3 available jobs")
    awa.enqueue("tests.noop", args={}, queue="email")
    text_becomes(browser, "state-count", lambda text: text.startswith("4 available jobs"))
    browser.find_element(By.ID, "id_kind").send_keys("tests.")
    awa.enqueue("tests.noop", args={}, queue="email")
    text_becomes(browser, "awa-live-refresh", lambda text: "paused while you edit" in text)
    assert browser.find_element(By.ID, "state-count").text.startswith("4 available jobs")
    assert browser.find_element(By.ID, "id_kind").get_attribute("value") == "tests."
    browser.find_element(By.ID, "id_kind").clear()  # back as the page rendered it
    browser.find_element(By.TAG_NAME, "h1").click()  # and nothing focused
    text_becomes(browser, "state-count", lambda text: text.startswith("5 available jobs"))
    assert browser.execute_script(f"return {MARKER} === true;")

    # A long job on a real worker: the runtimes page, refreshed every 2 s (remembered), shows
    # its progress bar moving while the page stays loaded.
    job_id = awa.enqueue("tests.browser.crunch_report", args={"pages": 40})
    browser.get(f"{live_server.url}/admin/awa_django/runtimeinstance/")
    wait_for(browser, "#runtimes")
    assert Select(browser.find_element(By.ID, "awa-live-interval")).first_selected_option.text == (
        "every 2 s"
    )
    browser.execute_script(f"{MARKER} = true;")
    until(browser, lambda d: progress_of(d, job_id) is not None)
    first = read(browser, lambda d: progress_of(d, job_id)) or 0
    until(browser, lambda d: (progress_of(d, job_id) or 0) > first)
    assert browser.execute_script(f"return {MARKER} === true;")
    row = text_of(browser, f"running-job-{job_id}")
    assert "tests.browser.crunch_report" in row and " of 40" in row and " s" in row
    href = read(
        browser,
        lambda d: d.find_element(By.CSS_SELECTOR, f"#running-job-{job_id} a").get_attribute("href"),
    )
    assert href.endswith(f"/admin/awa_django/job/{job_id}/")
    browser.save_screenshot(str(screenshots / "11-runtimes-running-now.png"))
    awa.cancel(job_id)

    # The cron page: the example project's schedules, which the worker stored at start; the
    # first is paused, then triggered.
    Select(browser.find_element(By.ID, "awa-live-interval")).select_by_value("0")
    browser.get(f"{live_server.url}/admin/awa_django/queue/cron/")
    wait_for(browser, "#cron-schedules")
    name = browser.find_element(By.ID, "cron-1").get_attribute("data-schedule")
    assert "active" in browser.find_element(By.ID, "cron-1").text
    assert "(in " in browser.find_element(By.CSS_SELECTOR, "#cron-1 .next-fire").text
    browser.save_screenshot(str(screenshots / "12-cron-schedules.png"))
    browser.find_element(By.ID, "cron-pause-1").click()
    wait_for(browser, "ul.messagelist")
    assert "paused" in browser.find_element(By.ID, "cron-1").text
    assert [s.paused_by for s in awa.cron.list() if s.name == name] == ["oncall"]
    browser.find_element(By.ID, "cron-trigger-1").click()
    # The page the trigger posts to replaces this one, which also says "paused": wait for its
    # message, not for a text both pages show.
    message = until(
        browser,
        lambda d: next(
            (
                m.text
                for m in d.find_elements(By.CSS_SELECTOR, "ul.messagelist")
                if "triggered" in m.text
            ),
            None,
        ),
    )
    assert f"Cron schedule {name} triggered: job" in message
    assert "paused" in text_of(browser, "cron-1")
    browser.save_screenshot(str(screenshots / "13-cron-paused-and-triggered.png"))

    # A second worker deploys a different description of the default queue while the admin
    # runs the first one's code: the drift badge lists both values and who declares each.
    redeployed = json.loads(json.dumps(CONSOLE_SETTINGS))
    redeployed["QUEUES"]["default"]["description"] = REDEPLOYED_DESCRIPTION
    worker_process(
        env={
            "AWA_OVERRIDES": json.dumps(redeployed),
            "AWA_JOB_MODULES": "tests.jobs,tests.browser.handlers",
        }
    ).wait_ready()
    wait_until(lambda: len([r for r in runtimes.list() if r.live]) == 2, timeout=30)
    wait_until(lambda: stored_description() == REDEPLOYED_DESCRIPTION, timeout=30)
    with override_settings(AWA={**settings.AWA, "QUEUES": CONSOLE_SETTINGS["QUEUES"]}):
        browser.get(f"{live_server.url}/admin/awa_django/queuedescriptor/")
        wait_for(browser, "#queue-descriptors")
    assert "drift" in browser.find_element(By.ID, "queue-default").text
    # Both values show, on the row under the descriptor's, whichever worker published its
    # descriptor last: each recorded its own.
    versions = browser.find_element(By.ID, "queue-default-versions").text
    assert "“Orders and payments”" in versions and "“Orders, payments and refunds”" in versions
    browser.save_screenshot(str(screenshots / "14-queue-descriptors-drift.png"))
    assert sorted(p.name for p in screenshots.glob("*.png")) == [
        "10-queue-health-live.png",
        "11-runtimes-running-now.png",
        "12-cron-schedules.png",
        "13-cron-paused-and-triggered.png",
        "14-queue-descriptors-drift.png",
    ]


# Every refresh's request held for 5 s (longer than the 2 s interval), counting how many are
# unanswered at once.
SLOW_FETCH = """
window.awaCalls = 0; window.awaOpen = 0; window.awaMostOpen = 0;
var realFetch = window.fetch.bind(window);
window.fetch = function (url, options) {
  window.awaCalls++;
  window.awaOpen++;
  window.awaMostOpen = Math.max(window.awaMostOpen, window.awaOpen);
  return new Promise(function (resolve) { window.setTimeout(resolve, 5000); })
    .then(function () { return realFetch(url, options); })
    .finally(function () { window.awaOpen--; });
};
"""


def test_a_refresh_never_starts_while_the_previous_one_is_unanswered(
    live_server, browser: WebDriver
):
    log_in(browser, live_server.url)
    browser.get(f"{live_server.url}/admin/awa_django/deadletter/")
    wait_for(browser, "#awa-live-refresh")
    browser.execute_script(SLOW_FETCH)
    interval = Select(browser.find_element(By.ID, "awa-live-interval"))
    interval.select_by_value("2")
    until(browser, lambda d: d.execute_script("return window.awaCalls;") == 1, timeout=10)
    # Changing the interval while a request is out must not start a second one beside it.
    Select(browser.find_element(By.ID, "awa-live-interval")).select_by_value("5")
    Select(browser.find_element(By.ID, "awa-live-interval")).select_by_value("2")
    until(browser, lambda d: d.execute_script("return window.awaCalls;") >= 2, timeout=20)
    assert browser.execute_script("return window.awaMostOpen;") == 1


def test_select_all_ticks_every_row_of_the_dlq_table(live_server, browser: WebDriver):
    ids = insert_entries(3)
    log_in(browser, live_server.url)
    browser.get(f"{live_server.url}/admin/awa_django/deadletter/")
    wait_for(browser, "#dlq-select-all")
    header = browser.find_element(By.ID, "dlq-select-all")
    assert header.is_displayed()
    header.click()
    boxes = [browser.find_element(By.ID, f"select-{job_id}") for job_id in ids]
    assert all(box.is_selected() for box in boxes)
    boxes[0].click()
    assert not header.is_selected()
    assert browser.execute_script("return arguments[0].indeterminate;", header)
    header.click()
    assert all(box.is_selected() for box in boxes)
    header.click()
    assert not any(box.is_selected() for box in boxes)
