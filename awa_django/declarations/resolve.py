"""Which job a kind names, and its arguments bound: what enqueue, the operator actions and cron
declarations check before anything is written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from awa_django.conf import get_settings
from awa_django.declarations.arguments import BoundArgs, json_each
from awa_django.declarations.discovery import ensure_jobs_discovered
from awa_django.declarations.exact_json import check_text, to_json_text
from awa_django.declarations.jobs import DeclaredJob, registry, unknown_kind_hint
from awa_django.exceptions import InvalidJob


def is_external(kind: str, patterns: Sequence[str]) -> bool:
    """Whether ``AWA["EXTERNAL_KINDS"]`` (``patterns``) lets this process enqueue ``kind``
    without a handler: an exact kind, or a prefix before a final ``*``."""
    return any(
        kind.startswith(pattern[:-1]) if pattern.endswith("*") else kind == pattern
        for pattern in patterns
    )


def resolve_job(
    kind_or_job: str | DeclaredJob[Any, Any],
) -> tuple[str, DeclaredJob[Any, Any] | None]:
    """The kind and handler of a job or kind string. A kind without a handler in this process
    is refused (``InvalidJob`` with the nearest registered kind, and where handlers are found),
    unless ``AWA["EXTERNAL_KINDS"]`` lists it: its handler is then None (only the JSON contract
    of its arguments is checked), and another service's workers run it."""
    if isinstance(kind_or_job, DeclaredJob):
        return kind_or_job.kind, kind_or_job
    if isinstance(kind_or_job, str) and kind_or_job:
        check_text(kind_or_job, field="kind")
        job = registry.get(kind_or_job)
        if job is None:
            # A web process may enqueue by name before anything imported the jobs modules; the
            # handler's signature and defaults still apply once they are imported.
            ensure_jobs_discovered()
            job = registry.get(kind_or_job)
        if job is None and not is_external(kind_or_job, get_settings().EXTERNAL_KINDS):
            # A misspelled kind, or a module no process imports, would otherwise be stored and
            # wait for a worker that can never run it.
            raise InvalidJob(
                f"kind {kind_or_job!r} has no handler in this process. "
                f"{unknown_kind_hint(kind_or_job)} If another service's workers run it, list "
                "it in AWA['EXTERNAL_KINDS'].",
                field="kind",
            )
        return kind_or_job, job
    raise InvalidJob(
        f"kind must be a registered @awa.job function or a kind string, got {kind_or_job!r}",
        field="kind",
    )


def bind_args(
    kind: str, job: DeclaredJob[Any, Any] | None, args: Mapping[str, Any] | None
) -> BoundArgs:
    """``args`` validated as the arguments of ``job`` (JSON only when there is no handler)."""
    if args is None:
        args = {}
    # A dict, the usual argument, skips the abstract Mapping check and its calls.
    if type(args) is not dict and not isinstance(args, Mapping):
        raise InvalidJob(
            f"args must be a dict of argument name to value for job {kind!r}, got {args!r}",
            field="args",
        )
    if job is not None:
        # A batch's short path (``json_each``): the usual plain dict is checked in one pass and
        # encoded once, with no call per argument; any other is bound by the handler, and
        # ``json_each`` answers as that binding does (``tests/unit/test_batch_arguments.py``).
        bound: list[BoundArgs] = []

        def bind(position: int, value: object) -> str:
            bound.append(job.bind(args))
            return bound[0].json

        text = next(json_each(job.func, (args,), bind))
        return bound[0] if bound else BoundArgs(dict(args), text)
    # No handler in this process: only the JSON contract can be checked.
    plain = dict(args)
    return BoundArgs(plain, to_json_text(plain, field="args"))
