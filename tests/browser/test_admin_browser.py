"""A real browser in the real admin: headless Chromium (Debian's, through its chromedriver)
logs into the example project's live server, opens queue health (changing a queue's concurrency
live and the charts' window) and the DLQ, retries a dead
job that a real worker process then completes, purges another after its confirmation page,
retries a filtered group of dead letters larger than a page at once, and sees descriptor drift
once a second worker declares the queue differently; it saves screenshots of every step.

Screenshots go to artifacts/browser/<python>-<django>/test_admin_browser/ at the repository
root (gitignored, see conftest.py); the path is printed.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth.models import User
from django.db import connection
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

import awa_django as awa

# Registers the kinds this process enqueues for its worker subprocess, as a web process does.
import tests.browser.handlers  # noqa: F401
from awa_django.ops import queues, runtimes
from tests.conftest import wait_until

WORKER_SETTINGS = {
    "QUEUES": {
        "default": {
            "concurrency": 4,
            "dlq": True,
            "display_name": "Default",
            "description": "Orders and payments",
            "owner": "shop team",
        },
        "email": {"concurrency": 2},
    },
    "QUEUE_STATS_INTERVAL_S": 1,
    "RUNTIME_SNAPSHOT_INTERVAL_S": 1,
    "RUNTIME_STALE_AFTER_S": 30,
}


def seed_last_hour(queue: str) -> None:
    """Samples the leader would have stored over the hour before this test (one a minute, a
    morning rush and its backlog draining), so the charts have a history to draw; the test's
    own worker adds the newest samples."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_stat_samples (queue, sampled_at, available, scheduled, "
            "retryable, running, waiting_external, dlq, lag_s, completed, failed) "
            "SELECT %s, now() - make_interval(mins => m), "
            "(400 * exp(-power((m - 35) / 8.0, 2)))::int, 12, (m %% 7), 4, 0, 0, "
            "2 * exp(-power((m - 35) / 8.0, 2)), "
            "(30 + 25 * exp(-power((m - 33) / 6.0, 2)))::int, (m %% 11 = 0)::int "
            "FROM generate_series(2, 60) m",
            [queue],
        )


def dead_noops(count: int, *, error_type: str = "", message: str = "x") -> list[int]:
    """``count`` dead letters of a kind the worker runs, as if they had failed for good: each
    with one error of ``error_type`` (none when empty) whose message is ``message`` with
    ``{n}`` replaced by the entry's number."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt, "
            "original_run_lease, max_attempts, created_at, metadata, tags, errors, dlq_reason, "
            "dlq_at) SELECT nextval('awa.job_id_seq'), 'tests.noop', 'default', 2, "
            "jsonb_build_object('n', n), 3, 3, 3, now(), '{}', '{}', "
            "jsonb_build_array(jsonb_strip_nulls(jsonb_build_object('attempt', 3, 'at', now(), "
            "'message', replace(%s, '{n}', n::text), 'type', nullif(%s, '')))), "
            "'attempts_exhausted', now() FROM generate_series(1, %s) n RETURNING job_id",
            [message, error_type, count],
        )
        return sorted(row[0] for row in cursor.fetchall())


def wait_for(driver: WebDriver, css: str, timeout: float = 20.0) -> None:
    WebDriverWait(driver, timeout).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
    )


def test_operator_retries_a_dead_job_from_the_admin(
    live_server, worker_process, browser: WebDriver, screenshots: Path
):
    User.objects.create_superuser("oncall", password="correct horse")
    worker_process(
        env={
            "AWA_OVERRIDES": json.dumps(WORKER_SETTINGS),
            "AWA_JOB_MODULES": "tests.jobs,tests.browser.handlers",
        }
    ).wait_ready()
    for order in range(3):
        awa.enqueue("tests.noop", args={"n": order})
    job_id = awa.enqueue("tests.browser.charge_order", args={"order": 1042}, max_attempts=1)
    doomed = awa.enqueue("tests.browser.charge_order", args={"order": 1043}, max_attempts=1)
    wait_until(lambda: {awa.get_job(job_id).state, awa.get_job(doomed).state} == {"dlq"}, 30)
    leases = [awa.get_job(job_id).run_lease]
    # The leader's own samples are in before the page is opened.
    wait_until(lambda: len(queues.history("default")) >= 2, timeout=30)
    seed_last_hour("default")

    browser.get(f"{live_server.url}/admin/login/?next=/admin/")
    browser.find_element(By.NAME, "username").send_keys("oncall")
    browser.find_element(By.NAME, "password").send_keys("correct horse")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    # Not #content-main: the login page has one too, so that wait could end before the
    # redirect and read the login page. The user tools exist only once logged in.
    wait_for(browser, "#user-tools")
    assert "Awa job queue" in browser.page_source
    browser.save_screenshot(str(screenshots / "01-admin-index.png"))

    browser.get(f"{live_server.url}/admin/awa_django/queue/")
    wait_for(browser, "#queue-health")
    row = browser.find_element(By.ID, "queue-default").text
    assert "active" in row
    assert browser.find_elements(By.CSS_SELECTOR, "#chart-default svg polyline")
    browser.save_screenshot(str(screenshots / "02-queue-health.png"))
    # On a 1,024-pixel screen (the admin's sidebar open) the page is no wider than the window:
    # the table scrolls sideways in its box, and the first cell of each row (the queue, its
    # status, Pause and Drain…) stays in view wherever it is scrolled to.
    browser.set_window_size(1024, 900)
    visible = (
        "const box = document.getElementById('queue-health').parentElement.getBoundingClientRect();"
        "const inside = (e) => { const r = e.getBoundingClientRect();"
        " return r.left >= box.left - 0.5 && r.right <= box.right + 0.5; };"
        "return ['pause-default', 'drain-default', 'drain-email']"
        " .map((id) => inside(document.getElementById(id)))"
        " .concat([inside(document.getElementById('queue-default').lastElementChild)]);"
    )
    overflow = browser.execute_script(
        "const root = document.documentElement; return root.scrollWidth - root.clientWidth;"
    )
    assert overflow <= 0, f"queue health is {overflow}px wider than a 1024px window"
    assert browser.execute_script(visible)[:3] == [True, True, True]
    browser.save_screenshot(str(screenshots / "02b-queue-health-1024.png"))
    browser.execute_script(
        "const box = document.getElementById('queue-health').parentElement;"
        "box.scrollLeft = box.scrollWidth;"
    )
    # Scrolled to its last column, the actions are still there.
    assert browser.execute_script(visible) == [True, True, True, True]
    browser.save_screenshot(str(screenshots / "02b-queue-health-1024-scrolled.png"))
    browser.set_window_size(1400, 1000)

    # The concurrency changed from the page (a plain form): the running worker subprocess
    # applies it without a restart, and its runtime snapshot says so.
    field = browser.find_element(By.CSS_SELECTOR, "#concurrency-email input[name=concurrency]")
    field.clear()
    field.send_keys("3")
    browser.find_element(By.ID, "set-concurrency-email").click()
    wait_for(browser, "ul.messagelist")
    assert "at most 3 jobs at once" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    assert "3 set live" in browser.find_element(By.ID, "concurrency-email").text
    wait_until(lambda: [r.queues.get("email") for r in runtimes.list()] == [3], timeout=15)
    # The chart window is a plain link too.
    browser.find_element(By.LINK_TEXT, "last 24 hours").click()
    wait_for(browser, "#chart-window strong")
    assert browser.find_element(By.CSS_SELECTOR, "#chart-window strong").text == "last 24 hours"
    browser.save_screenshot(str(screenshots / "02c-queue-health-24h.png"))

    browser.get(f"{live_server.url}/admin/awa_django/deadletter/")
    wait_for(browser, "#dlq-results")
    assert "attempts_exhausted" in browser.find_element(By.ID, "dlq-results").text
    browser.save_screenshot(str(screenshots / "03-dlq-list.png"))

    browser.find_element(By.LINK_TEXT, str(job_id)).click()
    wait_for(browser, "#dlq-args")
    assert "payment gateway timed out charging order 1042" in browser.page_source
    browser.save_screenshot(str(screenshots / "04-dlq-detail.png"))

    browser.find_element(By.ID, "dlq-retry").click()
    wait_for(browser, "ul.messagelist")
    assert f"Job {job_id} retried." in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    leases.append(awa.get_job(job_id).run_lease)
    browser.save_screenshot(str(screenshots / "05-dlq-retried.png"))

    wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=30)
    leases.append(awa.get_job(job_id).run_lease)
    # run_lease never goes back: the completed attempt ran under a larger one than the failure.
    assert leases == sorted(leases) and leases[-1] > leases[0], leases
    browser.get(f"{live_server.url}/admin/awa_django/job/{job_id}/")
    wait_for(browser, "#job-state")
    assert browser.find_element(By.ID, "job-state").text == "completed"
    attempts = browser.find_element(By.ID, "job-attempts").text
    assert "failed" in attempts and "completed" in attempts
    browser.save_screenshot(str(screenshots / "06-job-completed.png"))

    browser.get(f"{live_server.url}/admin/awa_django/deadletter/")
    wait_for(browser, "#dlq-results")
    browser.find_element(By.ID, f"select-{doomed}").click()
    browser.find_element(By.ID, "dlq-purge").click()
    wait_for(browser, "#confirm-purge")
    assert f"job {doomed}" in browser.find_element(By.ID, "purge-ids").text
    assert awa.dlq.get(doomed) is not None
    browser.save_screenshot(str(screenshots / "07-dlq-purge-confirm.png"))
    browser.find_element(By.ID, "confirm-purge").click()
    wait_for(browser, "ul.messagelist")
    assert f"Job {doomed} purged." in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    # Gone from every reading: the rows the ring still holds are hidden until prune.
    assert awa.dlq.get(doomed) is None and awa.get_job(doomed) is None

    # A group of dead letters larger than a page, found by a filter and retried all at once
    # after the count is confirmed; the real worker then runs every one of them.
    group = dead_noops(60)
    browser.get(f"{live_server.url}/admin/awa_django/deadletter/?kind=tests.noop")
    wait_for(browser, "#dlq-matching")
    browser.find_element(By.ID, "dlq-retry-matching").click()
    wait_for(browser, "#confirm-matching")
    count = browser.find_element(By.ID, "matching-count").text
    assert count == "60 dead-letter jobs match kind=tests.noop."
    browser.save_screenshot(str(screenshots / "07b-dlq-retry-matching-confirm.png"))
    browser.find_element(By.ID, "confirm-matching").click()
    wait_for(browser, "ul.messagelist")
    assert (
        "Retried 60 dead-letter jobs matching kind=tests.noop."
        in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    )
    wait_until(lambda: {job.state for job in awa.get_jobs(group)} == {"completed"}, timeout=60)

    # "What is failing?": dead letters grouped by error, one group retried at once after its
    # count is confirmed, the other group left where it is.
    missing = dead_noops(40, error_type="LookupError", message="order {n} not found")
    other = dead_noops(5, error_type="ValueError", message="bad input {n}")
    browser.get(f"{live_server.url}/admin/awa_django/deadletter/groups/")
    wait_for(browser, "#dlq-groups")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.dlq-group")
    (lookup,) = [row for row in rows if "order <n> not found" in row.text]
    assert lookup.find_element(By.CLASS_NAME, "group-count").text == "40"
    browser.save_screenshot(str(screenshots / "07c-dlq-groups.png"))
    lookup.find_element(By.CLASS_NAME, "group-retry").click()
    wait_for(browser, "#confirm-matching")
    assert browser.find_element(By.ID, "matching-count").text.startswith(
        "40 dead-letter jobs match"
    )
    browser.find_element(By.ID, "confirm-matching").click()
    wait_for(browser, "ul.messagelist")
    assert (
        "Retried 40 dead-letter jobs matching error type=LookupError, "
        "message like=order <n> not found."
    ) in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    wait_until(lambda: {job.state for job in awa.get_jobs(missing)} == {"completed"}, timeout=60)
    assert sorted(entry.job_id for entry in awa.dlq.list()) == other

    # A second worker deploys a different description of the default queue: drift.
    redeployed = json.loads(json.dumps(WORKER_SETTINGS))
    redeployed["QUEUES"]["default"]["description"] = "Orders, payments and refunds"
    worker_process(
        env={
            "AWA_OVERRIDES": json.dumps(redeployed),
            "AWA_JOB_MODULES": "tests.jobs,tests.browser.handlers",
        }
    ).wait_ready()
    wait_until(lambda: len([r for r in runtimes.list() if r.live]) == 2, timeout=30)
    wait_until(lambda: runtimes.leader() is not None, timeout=30)

    browser.get(f"{live_server.url}/admin/awa_django/runtimeinstance/")
    wait_for(browser, "#leader")
    assert "Maintenance leader" in browser.find_element(By.ID, "leader").text
    browser.save_screenshot(str(screenshots / "08-runtimes.png"))

    browser.get(f"{live_server.url}/admin/awa_django/queuedescriptor/")
    wait_for(browser, "#queue-descriptors")
    assert "drift" in browser.find_element(By.ID, "queue-default").text
    assert "current" in browser.find_element(By.ID, "queue-email").text
    # Each version of the drifting descriptor is one line under its row, not several lines
    # wrapped in the status cell.
    heights = browser.execute_script(
        "return [...document.querySelectorAll('#queue-default-versions li')].map((li) =>"
        " li.getBoundingClientRect().height / parseFloat(getComputedStyle(li).fontSize));"
    )
    assert len(heights) == 2 and max(heights) < 2.2, heights
    browser.save_screenshot(str(screenshots / "09-queue-descriptors.png"))

    assert sorted(p.name for p in screenshots.glob("*.png")) == [
        "01-admin-index.png",
        "02-queue-health.png",
        "02b-queue-health-1024-scrolled.png",
        "02b-queue-health-1024.png",
        "02c-queue-health-24h.png",
        "03-dlq-list.png",
        "04-dlq-detail.png",
        "05-dlq-retried.png",
        "06-job-completed.png",
        "07-dlq-purge-confirm.png",
        "07b-dlq-retry-matching-confirm.png",
        "07c-dlq-groups.png",
        "08-runtimes.png",
        "09-queue-descriptors.png",
    ]
