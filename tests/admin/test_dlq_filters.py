"""The DLQ's kind and error-type filters as an operator types them (any case, the start of the
name or of one of its dotted parts), the count of everything a filter matches, and a group
(type with fingerprint) still matched exactly."""

from __future__ import annotations

import json

from django.db import connection
from django.urls import reverse

import awa_django as awa
from awa_django.admin import dlq as dlq_admin
from tests.admin.test_dlq import listed_ids, messages_of

LIST = "admin:awa_django_deadletter_changelist"
MATCHING = "admin:awa_django_deadletter_act_matching"
ACT = "admin:awa_django_deadletter_act"


def entries(
    count: int, *, kind: str, error_type: str, message: str = "order 7 not found"
) -> list[int]:
    """``count`` DLQ rows written directly, each with one error of ``error_type``."""
    error = json.dumps({"attempt": 1, "type": error_type, "message": message})
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt,"
            " original_run_lease, max_attempts, created_at, metadata, tags, errors, dlq_reason)"
            " SELECT nextval('awa.job_id_seq'), %s, 'default', 2, '{}', 1, 1, 1, now(), '{}',"
            " '{}', jsonb_build_array(%s::jsonb), 'terminal_error'"
            " FROM generate_series(1, %s) RETURNING job_id",
            [kind, error, count],
        )
        return sorted((row[0] for row in cursor.fetchall()), reverse=True)


def test_error_type_matches_any_case_from_the_start_of_a_dotted_part(operator_client):
    lookup = entries(3, kind="shop.tasks.Charge", error_type="builtins.LookupError")
    entries(2, kind="shop.tasks.Charge", error_type="builtins.KeyError")
    url = reverse(LIST)
    for typed in ("LookupError", "lookup", "LOOKUPERR", "builtins.Lookup", "builtins.lookuperror"):
        response = operator_client.get(url, {"error_type": typed})
        assert listed_ids(response) == lookup, typed
        assert "3 entries match this filter." in response.content.decode(), typed
    # Inside a part is not a prefix.
    for typed in ("Error", "ookup", "tins"):
        assert listed_ids(operator_client.get(url, {"error_type": typed})) == [], typed


def test_kind_matches_any_case_from_the_start_of_a_dotted_part(operator_client):
    charge = entries(2, kind="shop.tasks.Charge", error_type="ValueError")
    entries(1, kind="mail.send", error_type="ValueError")
    url = reverse(LIST)
    for typed in ("charge", "SHOP", "tasks.ch", "shop.tasks.Charge"):
        assert listed_ids(operator_client.get(url, {"kind": typed})) == charge, typed
    assert listed_ids(operator_client.get(url, {"kind": "harge"})) == []
    # A prefix filter combines with the others.
    response = operator_client.get(url, {"kind": "charge", "error_type": "value"})
    assert listed_ids(response) == charge
    assert "2 entries match this filter." in response.content.decode()


def test_the_list_counts_the_whole_match_not_the_page(operator_client):
    entries(60, kind="tests.bulk", error_type="builtins.LookupError")
    entries(1, kind="tests.bulk", error_type="builtins.KeyError")
    url = reverse(LIST)
    unfiltered = operator_client.get(url)
    assert len(listed_ids(unfiltered)) == 50
    assert "61 entries in the dead-letter queue." in unfiltered.content.decode()
    one = operator_client.get(url, {"error_type": "key"})
    assert "1 entry matches this filter." in one.content.decode()
    assert (
        "0 entries match this filter." in operator_client.get(url, {"kind": "x"}).content.decode()
    )


def test_all_matching_acts_on_what_the_prefix_filter_lists(operator_client):
    lookup = entries(3, kind="tests.bulk", error_type="builtins.LookupError")
    kept = entries(2, kind="tests.bulk", error_type="builtins.KeyError")
    data = {"action": "purge", "error_type": "lookup"}
    confirm = operator_client.post(reverse(MATCHING), data)
    assert confirm.status_code == 200 and confirm.context["count"] == 3
    done = operator_client.post(
        reverse(MATCHING), {**data, "counted": 3, "confirmed": "on"}, follow=True
    )
    assert any("Purged 3 dead-letter jobs" in m for m in messages_of(done))
    remaining = {entry.job_id for entry in awa.dlq.list()}
    assert remaining == set(kept) and not remaining & set(lookup)


def test_a_group_matches_its_error_type_exactly(operator_client):
    group = entries(2, kind="tests.bulk", error_type="builtins.LookupError")
    entries(1, kind="tests.bulk", error_type="builtins.LookupErrorOfAnotherKind")
    params = {"error_type": "builtins.LookupError", "fingerprint": "order <n> not found"}
    response = operator_client.get(reverse(LIST), params)
    assert listed_ids(response) == group
    confirm = operator_client.post(reverse(MATCHING), {**params, "action": "retry"})
    assert confirm.context["count"] == 2


def test_python_api_prefix_filters(awa_db):
    lookup = entries(2, kind="shop.Charge", error_type="builtins.LookupError")
    entries(1, kind="shop.Charge", error_type="builtins.KeyError")
    found = awa.dlq.list(error_type_prefix="LookupError")
    assert sorted(e.job_id for e in found) == sorted(lookup)
    # The exact filters stay exact.
    assert awa.dlq.list(error_type="LookupError") == []
    assert awa.dlq.list(kind="charge") == []
    assert len(awa.dlq.list(kind_prefix="charge")) == 3
    assert awa.dlq.purge_bulk(kind_prefix="CHARGE", error_type_prefix="key") == 1


def test_row_actions_land_back_on_the_filtered_list(operator_client):
    kept = entries(2, kind="shop.Charge", error_type="builtins.LookupError")
    other = entries(1, kind="mail.send", error_type="builtins.LookupError")
    query = "kind=charge&error_type=lookup"
    listing = operator_client.get(reverse(LIST) + "?" + query)
    assert f'name="return_query" value="{query.replace("&", "&amp;")}"' in listing.content.decode()

    retried = operator_client.post(
        reverse(ACT), {"action": "retry", "job_ids": [kept[0]], "return_query": query}
    )
    assert retried.status_code == 302 and retried["Location"] == reverse(LIST) + "?" + query

    confirm = operator_client.post(
        reverse(ACT), {"action": "purge", "job_ids": [kept[1]], "return_query": query}
    )
    back = reverse(LIST) + "?" + query
    assert f'href="{back.replace("&", "&amp;")}"' in confirm.content.decode()
    purged = operator_client.post(
        reverse(ACT),
        {"action": "purge", "job_ids": [kept[1]], "return_query": query, "confirmed": "on"},
    )
    assert purged["Location"] == back
    # A form error lands on the filtered list too; a foreign URL in the field is only a query.
    refused = operator_client.post(reverse(ACT), {"action": "retry", "return_query": query})
    assert refused["Location"] == back
    odd = operator_client.post(
        reverse(ACT),
        {"action": "retry", "job_ids": [other[0]], "return_query": "https://x.example/"},
    )
    assert odd["Location"].startswith(reverse(LIST) + "?")


def test_all_matching_lands_back_on_the_filtered_list(operator_client):
    entries(2, kind="shop.Charge", error_type="builtins.LookupError")
    done = operator_client.post(
        reverse(MATCHING),
        {"action": "retry", "kind": "charge", "age": "", "counted": 2, "confirmed": "on"},
    )
    assert done["Location"] == reverse(LIST) + "?kind=charge"


def test_the_list_count_stops_at_its_cap_and_says_so(operator_client, monkeypatch):
    monkeypatch.setattr(dlq_admin, "LIST_COUNT_CAP", 5)
    entries(7, kind="tests.bulk", error_type="builtins.LookupError")
    entries(5, kind="tests.bulk", error_type="builtins.KeyError")
    url = reverse(LIST)
    assert (
        "More than 5 entries in the dead-letter queue." in operator_client.get(url).content.decode()
    )
    capped = operator_client.get(url, {"error_type": "lookup"}).content.decode()
    assert "More than 5 entries match this filter." in capped
    exact = operator_client.get(url, {"error_type": "key"}).content.decode()
    assert "5 entries match this filter." in exact and "More than" not in exact
    # The confirmation of an action on everything matching counts exactly.
    confirm = operator_client.post(reverse(MATCHING), {"action": "purge", "error_type": "lookup"})
    assert confirm.context["count"] == 7
