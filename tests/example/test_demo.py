"""``manage.py awa_demo`` tells the whole story and fails loudly when it does not hold."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from example_project.shop import jobs
from example_project.shop.models import Order

pytestmark = pytest.mark.usefixtures("awa_db")


def test_demo_runs_every_outcome_and_proves_the_rollbacks():
    out, err = StringIO(), StringIO()

    call_command("awa_demo", stdout=out, stderr=err)

    text = out.getvalue()
    assert err.getvalue() == ""
    # Both rolled-back enqueues (the view's and the code's) are proven absent.
    assert text.count("never existed and never ran") == 2
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
