"""``manage.py awa_demo`` tells the whole story and fails loudly when it does not hold."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

import awa_django as awa
from example_project.shop import jobs
from example_project.shop.models import Order, SentEmail

pytestmark = pytest.mark.usefixtures("awa_db")


def test_demo_runs_every_outcome_and_proves_the_rollbacks():
    out, err = StringIO(), StringIO()

    call_command("awa_demo", stdout=out, stderr=err)

    text = out.getvalue()
    assert err.getvalue() == ""
    # Both rolled-back enqueues (the view's and the code's) are reported absent ...
    proofs = re.findall(
        r"order #(\d+) exists: no; awa.get_job\((\d+)\): None; e-mails sent by job #\2: 0\n"
        r"   => rolled-back job #\2 and order #\1 never existed and never ran",
        text,
    )
    assert len(proofs) == 2, text
    # ... and really are.
    for order_id, job_id in proofs:
        assert not Order.objects.filter(pk=int(order_id)).exists()
        assert awa.get_job(int(job_id)) is None
        assert not SentEmail.objects.filter(job_id=int(job_id)).exists()
    for outcome in ("completed", "failed", "cancelled"):
        assert f" {outcome} " in text
    assert "InvalidJob" in text
    assert text.rstrip().endswith("Demo OK: every job ended as the story says.")
    # The orders of the story were really written (the rolled-back ones were not).
    assert Order.objects.count() == 7


def test_demo_exits_non_zero_when_a_job_ends_unexpectedly(monkeypatch):
    # With no declined cards, charge_card completes instead of failing terminally.
    monkeypatch.setattr(jobs, "DECLINED_CARDS", frozenset())
    out, err = StringIO(), StringIO()

    with pytest.raises(CommandError, match="did not hold"):
        call_command("awa_demo", stdout=out, stderr=err)

    assert "card declined): state is 'completed', expected 'failed'" in err.getvalue()
    assert "Demo OK" not in out.getvalue()
