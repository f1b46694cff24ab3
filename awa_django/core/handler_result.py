"""What a handler did, and the return value it keeps with its job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from awa_django.declarations.exact_json import to_json_text
from awa_django.declarations.jobs import JobContext
from awa_django.exceptions import InvalidJob, InvalidReturnValue, JobOutcome

# Largest return value (JSON text, UTF-8 bytes) a job may keep: results live in the done row,
# which every read of the job loads, so big payloads belong in the caller's own storage.
MAX_RESULT_BYTES: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class HandlerResult:
    """What a handler did: returned (``outcome`` is None), or raised or returned ``outcome``
    (an exception, or an ``awa.Snooze``/``Cancel``/``RetryAfter``/``WaitForCallback``)."""

    outcome: BaseException | None = None
    # The return value to keep with the completed job, as JSON text (see ``StoredReturn``).
    result_json: str | None = None
    # The workflow steps the handler added (``ctx.workflow.add``), as a JSON array; None when
    # it added none (nearly always).
    added_steps_json: str | None = None


@dataclass(frozen=True, slots=True)
class StoredReturn:
    """Returned by a handler whose return value must be kept with the job (django.tasks).

    Build it with ``StoredReturn.of(value)``: the value is checked once, in the handler, so an
    unstorable value fails the attempt like any other error. A plain ``@awa.job`` handler's
    return value other than None is turned into one by ``kept_return`` as it returns.
    """

    json: str

    @classmethod
    def of(cls, value: object) -> StoredReturn:
        """``value`` as JSON text within ``MAX_RESULT_BYTES``, else ``InvalidReturnValue``."""
        advice = "; store large results yourself and return a reference to them"
        return cls(
            capped_json(value, field="return value", error=InvalidReturnValue, advice=advice)
        )


def capped_json(value: object, *, field: str, error: type[Exception], advice: str = "") -> str:
    """``value`` (named ``field``) as the JSON text to keep with its job, within
    ``MAX_RESULT_BYTES``; else ``error``, its message ending with ``advice``."""
    try:
        text = to_json_text(value, field=field)
    except InvalidJob as exc:
        raise error(str(exc)) from None
    size = len(text.encode())
    if size > MAX_RESULT_BYTES:
        raise error(
            f"{field} is {size} bytes of JSON, over the {MAX_RESULT_BYTES}-byte cap{advice}"
        )
    return text


def kept_return(value: object, ctx: JobContext) -> object:
    """What a handler returned other than None, with a plain value (not an outcome) made a
    ``StoredReturn``. Called where the handler ran (its thread, or the loop for an async one),
    so a value too large or not exactly JSON fails that attempt alone, terminally: running the
    handler again would return the same value. The callers test for None, the common case,
    themselves: a comparison costs a completion less than a call."""
    if isinstance(value, JobOutcome | StoredReturn):
        return value
    try:
        return StoredReturn.of(value)
    except InvalidReturnValue as exc:
        raise InvalidReturnValue(f"job {ctx.job_id} ({ctx.kind}): {exc}") from None
