"""The live-refresh control every awa admin page carries: rendered hidden (a page without
JavaScript is a plain page), backed by a static file that ships with the package and is found
by collectstatic; absent from confirmation pages, which answer a POST."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

import awa_django as awa
from tests.admin.test_dlq import insert_entries
from tests.jobs import noop

SCRIPT = "awa_django/live_refresh.js"
PAGES = [
    "admin:awa_django_job_changelist",
    "admin:awa_django_deadletter_changelist",
    "admin:awa_django_queue_changelist",
    "admin:awa_django_queue_cron",
    "admin:awa_django_queue_shards",
    "admin:awa_django_queuedescriptor_changelist",
    "admin:awa_django_kinddescriptor_changelist",
    "admin:awa_django_runtimeinstance_changelist",
]


def control_of(body: str) -> str:
    return body[body.index('id="awa-live-refresh"') :].split("</div>")[0]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_has_a_hidden_refresh_control_and_its_script(page, operator_client):
    body = operator_client.get(reverse(page)).content.decode()
    control = control_of(body)
    assert " hidden>" in control.split("\n")[0]
    assert [option.split('"')[1] for option in control.split("<option value=")[1:]] == [
        "0",
        "2",
        "5",
        "15",
    ]
    assert f'<script src="/static/{SCRIPT}" defer></script>' in body
    # The region the script swaps, exactly once per page.
    assert body.count('id="content-main"') == 1


def test_detail_pages_refresh_too_and_view_only_staff_get_the_control(viewer_client):
    job_id = noop.enqueue(n=1)
    for url in (reverse("admin:awa_django_job_change", args=[job_id]), reverse(PAGES[2])):
        page = viewer_client.get(url)
        assert page.status_code == 200 and b'id="awa-live-refresh"' in page.content


def test_a_confirmation_page_does_not_refresh_itself(operator_client):
    page = operator_client.post(
        reverse("admin:awa_django_queue_act"), {"action": "drain", "queue": "default"}
    )
    assert page.status_code == 200 and b"Drain queue default?" in page.content
    assert b"awa-live-refresh" not in page.content and SCRIPT.encode() not in page.content


def test_the_script_is_a_static_file_collectstatic_copies(tmp_path: Path):
    found = finders.find(SCRIPT)
    assert found is not None and Path(found).is_relative_to(Path(awa.__file__).parent)
    with override_settings(STATIC_ROOT=str(tmp_path)):
        call_command("collectstatic", interactive=False, verbosity=0)
    collected = (tmp_path / SCRIPT).read_text()
    assert "content-main" in collected and "localStorage" in collected
    # The guard against stacked requests (exercised in tests/browser/test_live_console.py).
    assert "if (inFlight) {" in collected


def test_the_jobs_and_dlq_tables_have_a_select_all_box_for_those_who_may_act(
    operator_client, viewer_client
):
    noop.enqueue_many([{"n": 1}])
    insert_entries(1)
    pages = {
        "admin:awa_django_job_changelist": "jobs-select-all",
        "admin:awa_django_deadletter_changelist": "dlq-select-all",
    }
    for page, box in pages.items():
        body = operator_client.get(reverse(page)).content.decode()
        assert f'id="{box}"' in body and 'data-awa-select-all="job_ids"' in body
        assert "awa_django/select_all.js" in body
        assert f'id="{box}"' not in viewer_client.get(reverse(page)).content.decode()
    assert finders.find("awa_django/select_all.js") is not None
