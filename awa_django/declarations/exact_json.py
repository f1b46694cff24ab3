"""JSON text that PostgreSQL's ``jsonb`` gives back as exactly the value it was made from.

Job arguments, metadata, checkpoints, results and callback payloads are stored as ``jsonb`` and
read back with ``json.loads``. A value is accepted only if that round trip returns it unchanged,
in value and in type, at every depth; anything else is refused with ``InvalidJob`` naming the
path of the offending value (``args.items[2].name``), before any SQL is sent.

What ``jsonb`` would change, and what this module does about it:

- it keeps a number's digits and scale but not its exponent, so a float that Python writes as
  ``1e+16`` would come back as the int ``10000000000000000``: such floats (magnitude 1e16 and up)
  are written out in full with a ``.0``, which ``jsonb`` keeps;
- it has no negative zero: ``-0.0`` is refused (it would come back as ``0.0``);
- it cannot hold the NUL character or a lone UTF-16 surrogate: strings and keys holding one are
  refused (replacing them would change the value);
- ``json.loads`` (in every process that reads the job) recurses once per nesting level: more than
  ``MAX_DEPTH`` levels of lists and dicts are refused, well before Python's recursion limit.

Python types that JSON would turn into others are refused as well: tuples (lists), non-string
keys (strings), subclasses such as enum members (their base type), and anything without a JSON
form (datetimes, ``Decimal``, sets, model instances).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Final, TypeGuard

from awa_django.exceptions import InvalidJob

MAX_DEPTH: Final = 100

# Built once: json.dumps with options builds a new encoder on every call.
_ENCODER: Final = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
# The scalar types JSON gives back as themselves (floats and strings once checked).
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
# From this magnitude on, repr() writes a float with a positive exponent (1e+16).
_EXPONENT_FROM: Final = 1e16
# Ints whose text Python may refuse to produce (sys.set_int_max_str_digits cannot go below 640
# digits, about 2,126 bits); smaller ones skip the check.
_LONG_INT_BITS: Final = 2100
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_JSON_TYPES: Final = (str, int, float, list, dict)


class _Refused(Exception):
    """A value that cannot be stored exactly; ``keys`` is its path, innermost first."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.keys: list[object] = []


def to_json_text(value: object, *, field: str) -> str:
    """``value`` as JSON text that ``jsonb`` gives back exactly, else ``InvalidJob`` naming the
    offending value's path under ``field``."""
    if is_plain_flat(value):
        text = plain_text(value)
        if text is not None:
            return text
    try:
        written_out = _check(value, 1)
    except _Refused as refused:
        path = path_of(field, reversed(refused.keys))
        raise InvalidJob(f"{path} {refused.problem}", field=path) from None
    return _written_out(value) if written_out else _ENCODER.encode(value)


def exact_text(value: object) -> str:
    """JSON text of a value already accepted by ``to_json_text``, or built by awa from such
    values and plain strings (error entries, progress): large floats are written out in full."""
    text = _ENCODER.encode(value)
    return _written_out(value) if "e+" in text else text


def check_text(value: str, *, field: str) -> None:
    """``InvalidJob`` if PostgreSQL cannot store the string ``value`` (tags, ordering keys)."""
    problem = _text_problem(value)
    if problem is not None:
        raise InvalidJob(f"{field} {problem}", field=field)


def has_lone_surrogate(text: str) -> bool:
    """True for a string holding a lone surrogate (JSON's ``"\\ud800"``), which is not Unicode
    text: PostgreSQL refuses it in text and jsonb alike."""
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def storable_text(text: str) -> str:
    """``text`` with what PostgreSQL cannot store escaped: a NUL as the four characters ``\\x00``,
    a lone surrogate as ``\\udXXXX``. For error messages, cancel reasons and progress messages,
    which are arbitrary strings: one such character would make the whole batch of completions or
    heartbeats fail to write on every retry, holding back every attempt in it."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if has_lone_surrogate(text):
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def path_of(root: str, keys: Iterable[object]) -> str:
    """``root`` followed by ``keys`` as Python would index them: ``args.items[2].name``."""
    path = root
    for key in keys:
        if type(key) is str and key.isidentifier():
            path += f".{key}"
        else:
            path += f"[{key!r}]"
    return path


def moved(refusal: InvalidJob, root: str, new_root: str) -> InvalidJob:
    """``refusal`` of a value under ``root`` restated for the caller who passed it as
    ``new_root`` (the n-th dict of a batch, a task's positional arguments); others unchanged."""
    field = refusal.field
    if field is None or not (field == root or field.startswith((f"{root}.", f"{root}["))):
        return refusal
    message = str(refusal)
    if message.startswith(root):
        message = new_root + message[len(root) :]
    return InvalidJob(message, field=new_root + field[len(root) :])


def plain_text(value: dict[str, object]) -> str | None:
    """The JSON text of a dict ``is_plain_flat`` accepted, or None when the walk must decide.

    The usual shape of job arguments, checked without the walk: its text shows whether a
    string may hold a NUL or a lone surrogate. ensure_ascii writes both, and every other
    character beyond ASCII, as a \\u escape; the finer tests may still match plain text (an
    escaped backslash before "u0000", a character beyond the BMP): the walk decides."""
    try:
        text = _ENCODER.encode(value)
    except ValueError:  # an int too long to be written as text: the walk names it
        return None
    if "\\u" not in text or ("\\u0000" not in text and "\\ud" not in text):
        return text
    return None


def is_plain_flat(value: object) -> TypeGuard[dict[str, object]]:
    """A dict of string keys and scalars whose floats jsonb keeps as they are: finite, not -0.0
    and written without an exponent (NaN fails both comparisons)."""
    if type(value) is not dict:
        return False
    for key, item in value.items():
        kind = type(item)
        if type(key) is not str or kind not in _SCALARS:
            return False
        if kind is float and (
            not -_EXPONENT_FROM < item < _EXPONENT_FROM
            or (item == 0.0 and math.copysign(1.0, item) < 0)
        ):
            return False
    return True


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character (\\x00), which PostgreSQL cannot store"
    if not text.isascii():
        surrogate = _LONE_SURROGATE.search(text)
        if surrogate is not None:
            return (
                f"contains the lone surrogate U+{ord(surrogate.group()):04X}, which is not "
                "valid Unicode and which PostgreSQL cannot store"
            )
    return None


def _check(value: object, depth: int) -> bool:
    """Raise ``_Refused`` for what would not come back exactly; True if a float in ``value``
    must be written out in full (see ``_written_out``)."""
    # Exact types, not isinstance: a subclass (an enum member, an OrderedDict) would come back
    # as its base type.
    if type(value) is str:
        problem = _text_problem(value)
        if problem is not None:
            raise _Refused(problem)
        return False
    if type(value) is dict:
        return _check_dict(value, depth)
    if type(value) is list:
        return _check_list(value, depth)
    if type(value) is float:
        return _check_float(value)
    if type(value) is int:
        if value.bit_length() > _LONG_INT_BITS:
            try:
                str(value)
            except ValueError:
                raise _Refused(
                    "is an int with too many digits to be written as text "
                    "(sys.get_int_max_str_digits())"
                ) from None
        return False
    if type(value) is bool or value is None:
        return False
    raise _Refused(_type_problem(value))


def _check_depth(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _Refused(f"is nested more than {MAX_DEPTH} lists and dicts deep")


def _check_dict(value: dict[object, object], depth: int) -> bool:
    _check_depth(depth)
    written_out = False
    for key, item in value.items():
        if type(key) is not str:
            raise _Refused(
                f"has the key {key!r} ({type(key).__name__}); JSON object keys are strings, "
                "so it would come back as a different key"
            )
        problem = _text_problem(key)
        if problem is not None:
            raise _Refused(f"has the key {key!r}, which {problem}")
        try:
            if _check(item, depth + 1):
                written_out = True
        except _Refused as refused:
            refused.keys.append(key)
            raise
    return written_out


def _check_list(value: list[object], depth: int) -> bool:
    _check_depth(depth)
    written_out = False
    for index, item in enumerate(value):
        try:
            if _check(item, depth + 1):
                written_out = True
        except _Refused as refused:
            refused.keys.append(index)
            raise
    return written_out


def _check_float(value: float) -> bool:
    if not math.isfinite(value):
        raise _Refused(f"is {value!r}, which JSON cannot hold")
    if value == 0.0 and math.copysign(1.0, value) < 0:
        raise _Refused("is -0.0, which PostgreSQL would give back as 0.0; pass 0.0")
    return abs(value) >= _EXPONENT_FROM


def _type_problem(value: object) -> str:
    name = type(value).__name__
    if isinstance(value, tuple):
        return f"is a {name}, which would come back as a list; pass a list"
    for base in _JSON_TYPES:
        if isinstance(value, base):
            return (
                f"is a {name} (a subclass of {base.__name__}), which would come back as a "
                f"plain {base.__name__}; pass a {base.__name__} (for an enum member, its .value)"
            )
    return (
        f"is a {name}, which has no JSON form; pass dicts, lists, strings, numbers, booleans "
        "or None (an id instead of a model instance, an ISO string instead of a datetime)"
    )


def _written_out(value: object) -> str:
    """The JSON text of a checked value, with every float of magnitude 1e16 and up written out
    in full plus ``.0``: jsonb prints numbers without an exponent, and ``1e+16`` would come back
    as an int. Written out from its repr, the number keeps the value Python gave it."""
    if type(value) is float and abs(value) >= _EXPONENT_FROM:
        return f"{Decimal(repr(value)):f}.0"
    if type(value) is dict:
        items = (f"{_ENCODER.encode(key)}:{_written_out(item)}" for key, item in value.items())
        return "{" + ",".join(items) + "}"
    if type(value) is list:
        return "[" + ",".join(_written_out(item) for item in value) + "]"
    return _ENCODER.encode(value)
