"""A job enqueues through the functions its declaration gave it (#33): ``@awa.job`` gives them,
a handler built only to run (a django.tasks task's, a test's) has none and says so."""

from __future__ import annotations

import pytest

import awa_django as awa
from awa_django.declarations.jobs import DeclaredJob, registry


def handler(ctx: awa.JobContext, n: int = 0) -> None:
    return None


def test_a_job_built_only_to_run_refuses_to_enqueue_and_names_the_way():
    job: DeclaredJob[..., None] = DeclaredJob(
        handler, kind="tests.run_only", queue=None, priority=None, max_attempts=None
    )
    for enqueue in (job.enqueue, job.enqueue_on_commit):
        with pytest.raises(TypeError, match=r"tests\.run_only was not declared with @awa\.job"):
            enqueue(n=1)
    with pytest.raises(TypeError, match=r"enqueue it with awa\.enqueue"):
        job.enqueue_many([{"n": 1}])


def test_awa_job_gives_the_job_the_producers_functions_and_using_keeps_them():
    declared = awa.job(kind="tests.declared")(handler)
    try:
        assert declared._enqueuer is not None
        assert declared.using(queue="bulk")._enqueuer is declared._enqueuer
    finally:
        registry.unregister(declared)
