"""The rules carried by the settings' fields: every default passes its own rule, every value a
user can give has a rule (or a named relation that checks it), and whatever ``AWA`` holds,
``problems()`` answers with check ids and messages that name the offending key."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest
from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from awa_django import conf
from awa_django.conf_rules import Rule, rules_of

# Keys with no rule of their own: the named relations in conf check them (the database alias
# against settings.DATABASES, the queues' shape, the default queue against the queues, the
# worker database as an alias or a DSN).
CHECKED_BY_RELATIONS = {"DATABASE_ALIAS", "QUEUES", "DEFAULT_QUEUE", "WORKER_DATABASE"}
QUEUE_OPTIONS = sorted(f.name for f in fields(conf.QueueSettings) if f.name != "name")
KEYS = sorted(f.name for f in fields(conf.AwaSettings))


@pytest.mark.parametrize("cls", [conf.AwaSettings, conf.QueueSettings])
def test_every_default_passes_its_own_rule(cls):
    defaults = cls(name="default") if cls is conf.QueueSettings else cls()
    for name, rule in rules_of(cls).items():
        assert rule.problems(name, getattr(defaults, name)) == [], name


def test_every_setting_has_a_rule_or_a_relation():
    assert set(rules_of(conf.AwaSettings)) == set(KEYS) - CHECKED_BY_RELATIONS
    assert sorted(rules_of(conf.QueueSettings)) == QUEUE_OPTIONS
    assert all(isinstance(rule, Rule) for rule in rules_of(conf.AwaSettings).values())


def test_a_rule_message_names_the_key_and_keeps_secrets_out():
    with override_settings(AWA={"QUEUES": {"default": {"weight": 0}}, "RETRY_JITTER": 2}):
        messages = {p.message for p in conf.problems()}
    assert messages == {
        "AWA['QUEUES']['default']['weight'] must be an integer >= 1, got 0.",
        "AWA['RETRY_JITTER'] must be between 0 and 1, got 2.",
    }
    with override_settings(AWA={"CALLBACK_SECRET": "hunter2"}):
        (problem,) = conf.problems()
    assert problem.id == "awa.E050" and "hunter2" not in problem.message


def test_a_default_queue_of_any_type_is_reported_not_raised():
    with override_settings(AWA={"DEFAULT_QUEUE": ["default"]}):
        assert [p.id for p in conf.problems()] == ["awa.E007"]


# Values of every type a settings file may hold, and the edges of the rules' bounds.
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=4)
    | st.sampled_from([0, 1, 4, 1000, 2**31 - 1, 2**31, "default", "summary", "fleet", "*"])
)
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=4) | st.integers(), children, max_size=3)
    ),
    max_leaves=6,
)
QUEUES = VALUES | st.dictionaries(
    st.sampled_from(["default", "email", "bad name!", ""]) | st.integers(),
    VALUES | st.dictionaries(st.sampled_from([*QUEUE_OPTIONS, "bogus", 3]), VALUES, max_size=4),
    max_size=3,
)
AWA = st.dictionaries(st.sampled_from([*KEYS, "UNKNOWN", 7]), VALUES, max_size=6) | st.dictionaries(
    st.sampled_from(KEYS), VALUES, max_size=4
).flatmap(lambda raw: QUEUES.map(lambda queues: {**raw, "QUEUES": queues}))


@settings(max_examples=300, deadline=None)
@given(AWA)
def test_problems_never_raise_and_each_names_its_key(raw):
    with override_settings(AWA=raw):
        found = conf.problems()
    queues = raw.get("QUEUES")
    names = [key if key in KEYS else repr(key) for key in raw]
    names += [repr(name) for name in queues] if isinstance(queues, dict) else []
    for problem in found:
        assert re.fullmatch(r"awa\.E0\d\d", problem.id), problem
        assert any(name in problem.message for name in names), problem
