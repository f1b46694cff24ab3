"""Enqueue's input boundaries over generated values (#24): every value either comes back
exactly, from ``awa.get_job`` and as a worker hands it to the handler, or is refused with
``InvalidJob`` naming it; never a database error or a ``RecursionError``, and the caller's
transaction stays usable either way.

``storable`` restates the rule of docs/getting-started.md ("What a value can be") independently
of awa_django/declarations/exact_json.py, so each property also checks that exactly the values
the rule allows are accepted. Values come from Hypothesis with a fixed seed (``derandomize``) and
few examples, so the suite stays fast and CI sees the same values on every run; each test
enqueues all its examples first and then runs one worker over them.
"""

from __future__ import annotations

import copy
import datetime
import enum
import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any, TypeVar

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import awa_django as awa
from awa_django.tasks.compat import normalize_json
from tests.conftest import run_burst
from tests.jobs import echo, exact_repr
from tests.tasks import tasks

pytestmark = pytest.mark.usefixtures("awa_db")

T = TypeVar("T")
MAX_DEPTH = 100
EXAMPLES = settings(
    max_examples=100,
    derandomize=True,
    database=None,
    # Each example writes to PostgreSQL: its time depends on the machine, not on the value.
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Colour(enum.StrEnum):
    RED = "red"


class Size(enum.IntEnum):
    LARGE = 3


# -- the rule --------------------------------------------------------------------------------


def storable_text(text: str) -> bool:
    return "\x00" not in text and not any(0xD800 <= ord(char) <= 0xDFFF for char in text)


def storable(value: object, depth: int = 1) -> bool:
    """Whether the rule lets ``value`` be stored; ``depth`` counts its enclosing lists and dicts
    (the arguments dict itself is 1). Stops at the limit, so it never recurses 10,000 deep."""
    if type(value) is dict:
        return depth <= MAX_DEPTH and all(
            type(key) is str and storable_text(key) and storable(item, depth + 1)
            for key, item in value.items()
        )
    if type(value) is list:
        return depth <= MAX_DEPTH and all(storable(item, depth + 1) for item in value)
    if type(value) is str:
        return storable_text(value)
    if type(value) is float:
        return math.isfinite(value) and not (value == 0.0 and math.copysign(1.0, value) < 0)
    return type(value) in (int, bool, type(None))


def storable_tag(tag: object) -> bool:
    return type(tag) is str and tag != "" and storable_text(tag)


# -- values ----------------------------------------------------------------------------------

# Mostly ordinary values, with every kind of trouble mixed in: NUL, lone surrogates, strings
# that only look suspicious, NaN and the infinities, -0.0, floats that Python writes with an
# exponent, huge ints, Python values JSON would give back as something else, nesting past the
# limit. Each kind of trouble is rare enough that about half of the examples are storable.


def mostly(
    usual: st.SearchStrategy[T], odd: st.SearchStrategy[T], one_in: int
) -> st.SearchStrategy[T]:
    """``odd`` once in ``one_in`` draws, else ``usual``."""
    return st.integers(1, one_in).flatmap(lambda n: odd if n == 1 else usual)


texts = mostly(
    st.text(max_size=8),
    st.one_of(
        st.text(st.characters(exclude_categories=()), max_size=8),
        st.sampled_from(["\x00", "\ud800", "a\udfff", "😀", "\\u0000", "\\ud800", "1e+16", "-0.0"]),
    ),
    one_in=8,
)
floats = mostly(
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != 0 or str(x) == "0.0"),
    st.one_of(
        st.floats(),
        st.sampled_from([1e16, -1e16, 1.5e300, 1e308, 5e-324, 1e-7, 9999999999999998.0, -0.0]),
    ),
    one_in=4,
)
integers = st.one_of(st.integers(), st.sampled_from([10**16, -(10**30), 2**63, 2**64]))
scalars = st.one_of(st.none(), st.booleans(), integers, floats, texts)
unfaithful = st.one_of(
    st.tuples(scalars),
    st.sampled_from(
        [
            Colour.RED,
            Size.LARGE,
            OrderedDict(a=1),
            {1, 2},
            b"bytes",
            Decimal("1.5"),
            datetime.date(2026, 1, 1),
        ]
    ),
)
names = st.text("abcdefghij_", min_size=1, max_size=6)
keys = mostly(names, st.one_of(texts, st.integers(-2, 2), st.none()), one_in=10)
leaves = mostly(scalars, unfaithful, one_in=20)


def nested(value: object, depth: int) -> object:
    for _ in range(depth):
        value = [value]
    return value


shallow_values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=3)
    ),
    max_leaves=8,
)
# Now and then a value wrapped around the depth limit, or 10,000 lists deep.
values = mostly(
    shallow_values,
    st.builds(nested, shallow_values, st.sampled_from([97, 98, 99, 100, 10_000])),
    one_in=15,
)
arg_names = st.one_of(names, names, names, texts.filter(lambda text: text != ""))
arg_dicts = st.dictionaries(arg_names, values, max_size=4)


# -- helpers ---------------------------------------------------------------------------------


def under(field: str | None, root: str) -> bool:
    return field is not None and (field == root or field.startswith((f"{root}.", f"{root}[")))


def attempt(call: Callable[[], T], *, allowed: bool, root: str) -> T | None:
    """Run ``call`` in a transaction, as a caller would: it returns only if ``allowed``, and
    otherwise raises ``InvalidJob`` naming a value under ``root``. Any other error fails the
    property with the example that caused it. Afterwards the transaction must still work."""
    event("allowed" if allowed else "refused")  # shown by pytest --hypothesis-show-statistics
    with transaction.atomic():
        try:
            result = call()
        except awa.InvalidJob as refused:
            assert not allowed, f"refused a value the rule allows: {refused}"
            assert under(refused.field, root), refused.field
            assert str(refused).startswith(refused.field), str(refused)
            result = None
        else:
            assert allowed, "accepted a value the rule refuses"
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")  # an aborted transaction refuses every statement
    return result


def received(job_id: int) -> str:
    """What the echo handler recorded for ``job_id``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs WHERE job_id = %s", [job_id])
        (note,) = cursor.fetchone()
    return note


def handed(args: dict[str, Any], metadata: dict[str, Any] | None = None, tags: Any = ()) -> str:
    return exact_repr({"args": args, "metadata": metadata or {}, "tags": list(tags)})


def check_handlers(expected: dict[int, str]) -> None:
    """Run one worker over every accepted job; each handler got exactly what was enqueued."""
    summary = run_burst()
    assert summary.claimed == len(expected)
    for job_id, handed_value in expected.items():
        assert received(job_id) == handed_value, job_id


# -- properties ------------------------------------------------------------------------------


def test_enqueue_arguments_come_back_exactly_or_are_refused():
    expected: dict[int, str] = {}

    @EXAMPLES
    @given(arg_dicts)
    def check(args: dict[Any, Any]) -> None:
        job_id = attempt(lambda: awa.enqueue(echo, args=args), allowed=storable(args), root="args")
        if job_id is not None:
            assert exact_repr(awa.get_job(job_id).args) == exact_repr(args)
            expected[job_id] = handed(args)

    check()
    check_handlers(expected)


def test_enqueue_many_arguments_come_back_exactly_or_the_first_bad_dict_is_named():
    expected: dict[int, str] = {}

    @EXAMPLES
    @given(st.lists(arg_dicts, min_size=1, max_size=3))
    def check(args_list: list[dict[Any, Any]]) -> None:
        bad = [position for position, args in enumerate(args_list) if not storable(args)]
        root = f"args_list[{bad[0]}]" if bad else "args_list"
        job_ids = attempt(lambda: awa.enqueue_many(echo, args_list), allowed=not bad, root=root)
        for job_id, args in zip(job_ids or [], args_list if job_ids else [], strict=True):
            assert exact_repr(awa.get_job(job_id).args) == exact_repr(args)
            expected[job_id] = handed(args)

    check()
    check_handlers(expected)


def test_enqueue_on_commit_arguments_come_back_exactly_or_are_refused_at_once():
    expected: dict[int, str] = {}

    @EXAMPLES
    @given(st.dictionaries(names, values, max_size=3))
    def check(args: dict[str, Any]) -> None:
        before = {job.job_id for job in awa.list_jobs(kind="tests.echo", limit=1)}
        attempt(lambda: echo.enqueue_on_commit(**args), allowed=storable(args), root="args")
        # Committed by now: the job exists only if the arguments were accepted.
        newest = awa.list_jobs(kind="tests.echo", limit=1)
        if storable(args):
            (job,) = newest
            assert job.job_id not in before
            assert exact_repr(job.args) == exact_repr(args)
            expected[job.job_id] = handed(args)
        else:
            assert {job.job_id for job in newest} == before

    check()
    check_handlers(expected)


def test_metadata_comes_back_exactly_or_is_refused():
    expected: dict[int, str] = {}

    @EXAMPLES
    @given(st.dictionaries(keys, values, max_size=4))
    def check(metadata: dict[Any, Any]) -> None:
        job_id = attempt(
            lambda: awa.enqueue(echo, metadata=metadata),
            allowed=storable(metadata),
            root="metadata",
        )
        if job_id is not None:
            assert exact_repr(awa.get_job(job_id).metadata) == exact_repr(metadata)
            expected[job_id] = handed({}, metadata)

    check()
    check_handlers(expected)


def test_tags_come_back_exactly_or_are_refused():
    expected: dict[int, str] = {}

    @EXAMPLES
    @given(
        st.one_of(
            st.lists(texts, max_size=22),
            st.lists(st.one_of(texts, st.integers(0, 3)), max_size=3),
            st.tuples(texts, texts),
            texts,
            st.frozensets(texts, max_size=2),
        )
    )
    def check(tags: Any) -> None:
        allowed = type(tags) in (list, tuple) and len(tags) <= 20 and all(map(storable_tag, tags))
        job_id = attempt(lambda: awa.enqueue(echo, tags=tags), allowed=allowed, root="tags")
        if job_id is not None:
            assert exact_repr(awa.get_job(job_id).tags) == exact_repr(list(tags))
            expected[job_id] = handed({}, tags=tags)

    check()
    check_handlers(expected)


def test_ordering_keys_come_back_exactly_or_are_refused():
    expected: dict[int, str] = {}

    @EXAMPLES
    @given(st.one_of(texts, st.text(min_size=195, max_size=205), st.integers(0, 3)))
    def check(key: Any) -> None:
        allowed = storable_tag(key) and len(key) <= 200
        job_id = attempt(
            lambda: awa.enqueue(echo, ordering_key=key), allowed=allowed, root="ordering_key"
        )
        if job_id is not None:
            metadata = {"awa:ordering_key": key}
            assert exact_repr(awa.get_job(job_id).metadata) == exact_repr(metadata)
            expected[job_id] = handed({}, metadata)

    check()
    check_handlers(expected)


def test_unique_keys_are_equal_exactly_when_the_arguments_are():
    expected: dict[int, str] = {}
    nonces: Iterator[int] = itertools.count()

    @EXAMPLES
    @given(shallow_values, st.data())
    def check(first: Any, data: st.DataObject) -> None:
        # Half the time the same value again (a copy), else another one.
        second = data.draw(st.one_of(st.just(copy.deepcopy(first)), shallow_values))
        nonce = next(nonces)  # keys of earlier examples never collide with this one's

        def enqueue(value: Any) -> int:
            return awa.enqueue(
                echo,
                args={"nonce": nonce, "value": value},
                unique=awa.Unique(),
                on_conflict="return",
            )

        first_id = attempt(lambda: enqueue(first), allowed=storable([first]), root="args")
        second_id = attempt(lambda: enqueue(second), allowed=storable([second]), root="args")
        if first_id is not None:
            expected[first_id] = handed({"nonce": nonce, "value": first})
        if first_id is not None and second_id is not None:
            assert (first_id == second_id) == (exact_repr(first) == exact_repr(second))
        if second_id is not None and second_id != first_id:
            expected[second_id] = handed({"nonce": nonce, "value": second})

    check()
    check_handlers(expected)


def test_django_task_arguments_and_results_come_back_exactly_or_are_named_as_passed():
    accepted: dict[str, dict[str, Any]] = {}

    @EXAMPLES
    @given(st.lists(values, max_size=2), st.dictionaries(arg_names, values, max_size=2))
    def check(args: list[Any], kwargs: dict[str, Any]) -> None:
        # What the backend stores: Django's normalisation of the arguments (tuples to lists,
        # mappings to dicts), or the arguments as given when Django refuses them too.
        try:
            stored = {"args": normalize_json(args), "kwargs": normalize_json(kwargs)}
        except (TypeError, ValueError, RecursionError):
            stored = {"args": args, "kwargs": kwargs}
        bad_args = not storable(stored["args"], 2)
        result = attempt(
            lambda: tasks.echo.enqueue(*args, **kwargs),
            allowed=storable(stored),
            root="args" if bad_args else "kwargs",
        )
        if result is not None:
            back = tasks.echo.get_result(result.id)
            assert exact_repr({"args": back.args, "kwargs": back.kwargs}) == exact_repr(stored)
            accepted[result.id] = stored

    check()
    run_burst()
    for result_id, stored in accepted.items():
        result = tasks.echo.get_result(result_id)
        assert exact_repr(result.return_value) == exact_repr(stored), result_id
