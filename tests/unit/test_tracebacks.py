"""Tracebacks start at the handler: the frames of the modules that only carry a call from the
worker to the handler are left out, the handler's and everything below it (awa_django's own
frames included) are kept, and a traceback that is all runner is kept whole."""

from __future__ import annotations

from types import TracebackType

from awa_django.core import tracebacks

# A stand-in for the worker's executor: a module awa_django.worker.* that calls the handler and
# returns what it raised, as ``execute`` does.
RUNNER: dict[str, object] = {"__name__": "awa_django.worker.stand_in"}
exec(
    "def run(func):\n"
    "    try:\n"
    "        func()\n"
    "    except Exception as exc:\n"
    "        return exc\n"
    "def fail_here():\n"
    "    try:\n"
    "        raise KeyError('the runner itself')\n"
    "    except Exception as exc:\n"
    "        return exc\n",
    RUNNER,
)
# Something of awa_django's that a handler calls and that raises (``ctx.set_progress``, say).
LIBRARY: dict[str, object] = {"__name__": "awa_django.jobs_stand_in"}
exec("def check(value):\n    raise ValueError(f'bad value {value}')\n", LIBRARY)


def run(handler: object) -> BaseException:
    exc = RUNNER["run"](handler)  # type: ignore[operator]
    assert isinstance(exc, BaseException)
    return exc


def handler_fails() -> None:
    raise RuntimeError("disk full")


def handler_calls_the_library() -> None:
    LIBRARY["check"](42)  # type: ignore[operator]


def handler_wraps() -> None:
    try:
        handler_fails()
    except RuntimeError as exc:
        raise LookupError("while saving") from exc


def frame_names(tb: TracebackType | None) -> list[str]:
    names = []
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return names


def test_the_runners_frames_are_left_out_and_the_text_starts_at_the_handler():
    exc = run(handler_fails)
    assert frame_names(exc.__traceback__) == ["run", "handler_fails"]
    text = "".join(tracebacks.format_exception(exc))
    assert text.startswith("Traceback (most recent call last):\n  File ")
    first_frame = text.splitlines()[1]
    assert first_frame.endswith(", in handler_fails"), text
    assert "in run" not in text and text.endswith("RuntimeError: disk full\n")
    # The exception itself keeps its whole traceback.
    assert frame_names(exc.__traceback__) == ["run", "handler_fails"]
    exc_type, value, tb = tracebacks.exc_info(exc)
    assert (exc_type, value, frame_names(tb)) == (RuntimeError, exc, ["handler_fails"])


def test_awa_django_frames_below_the_handler_are_kept():
    exc = run(handler_calls_the_library)
    text = "".join(tracebacks.format_exception(exc))
    assert ", in handler_calls_the_library" in text.splitlines()[1]
    assert ", in check" in text and "in run" not in text


def test_chained_exceptions_are_shown_as_python_shows_them():
    exc = run(handler_wraps)
    text = "".join(tracebacks.format_exception(exc))
    assert "RuntimeError: disk full" in text
    assert "The above exception was the direct cause of the following exception" in text
    assert text.endswith("LookupError: while saving\n")
    assert "in run\n" not in text


def test_a_traceback_that_is_all_runner_is_kept_whole():
    exc = RUNNER["fail_here"]()  # type: ignore[operator]
    assert isinstance(exc, KeyError)
    assert frame_names(tracebacks.from_handler(exc.__traceback__)) == ["fail_here"]
    assert ", in fail_here" in "".join(tracebacks.format_exception(exc))


def test_an_exception_never_raised_has_no_traceback_to_trim():
    assert tracebacks.format_exception(ValueError("made, not raised")) == [
        "ValueError: made, not raised\n"
    ]


def test_the_same_failure_has_the_same_signature_whatever_its_message():
    first, second = run(handler_fails), run(handler_fails)
    assert tracebacks.signature(first) == tracebacks.signature(second)
    elsewhere = run(handler_calls_the_library)
    assert tracebacks.signature(elsewhere) != tracebacks.signature(first)
    assert tracebacks.signature(ValueError("a")) == tracebacks.signature(ValueError("b"))
    assert tracebacks.signature(ValueError("a")) != tracebacks.signature(KeyError("a"))
