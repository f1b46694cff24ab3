"""Loads the SQL that lives next to the code: named query blocks, migration files and the
storage functions.

A query file holds blocks that each start with a ``-- name: <block>`` header line followed by
comment lines describing the block; the statement follows. A block may stand in another of its
file as ``{{name}}`` (a filter several statements apply), so that it is written once; a
condition the statements of several files apply is a block of ``queries/fragments.sql``, which
every file may include (its own block of the name first). Files are parsed once, into a
read-only mapping, and a unit test checks that every block is used by ``awa_django.storage`` or
included by one that is.

``migrations/<migration>/`` holds one migration's own DDL, per plane, frozen once released;
``functions/<plane>.sql`` holds the current definitions of the storage functions and views
(``CREATE OR REPLACE`` only), applied by migration 0001 and again by each later migration that
changes one of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import LiteralString, cast

_HEADER = re.compile(r"^-- name: (?P<name>[a-z_]+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{\{(?P<name>[a-z_]+)\}\}")


# The query file of the fragments every query file may include.
FRAGMENTS = "fragments"


def parse_blocks(text: str, shared: Mapping[str, str] = MappingProxyType({})) -> dict[str, str]:
    """Split a query file into ``{name: statement}``; duplicate names are an error. An include
    names a block of the file or, failing that, one of ``shared``."""
    blocks: dict[str, str] = {}
    headers = list(_HEADER.finditer(text))
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        name = header.group("name")
        if name in blocks:
            raise ValueError(f"duplicate SQL block name {name!r}")
        blocks[name] = text[header.end() : end].strip()
    within = {**shared, **blocks}
    return {name: _included(block, within) for name, block in blocks.items()}


def _included(block: str, blocks: Mapping[str, str]) -> str:
    # One level: an included block is a fragment, not a statement that includes others.
    return _INCLUDE.sub(lambda match: _fragment(blocks, match.group("name")), block)


def _fragment(blocks: Mapping[str, str], name: str) -> str:
    if name not in blocks:
        raise ValueError(f"included SQL block {name!r} is not in the file")
    # Its comment lines stay out: a fragment stands inside a statement's line.
    return "\n".join(line for line in blocks[name].splitlines() if not line.startswith("--"))


def _text(plane: str) -> str:
    return resources.files(__package__).joinpath("queries", f"{plane}.sql").read_text()


@cache
def queries(plane: str) -> MappingProxyType[str, LiteralString]:
    """The named blocks of ``sql/queries/<plane>.sql``."""
    shared = queries(FRAGMENTS) if plane != FRAGMENTS else MappingProxyType({})
    # The text is package data, never user input: safe to treat as a literal statement. (mypy
    # reads LiteralString as str and calls the cast redundant; checkers that track it need it.)
    blocks = parse_blocks(_text(plane), shared).items()
    return MappingProxyType({k: cast(LiteralString, v) for k, v in blocks})  # type: ignore[redundant-cast]


def migration(name: str, *parts: str) -> str:
    """The files ``sql/migrations/<name>/<part>.sql``, joined in the order given."""
    directory = resources.files(__package__).joinpath("migrations", name)
    return "\n".join(directory.joinpath(f"{part}.sql").read_text() for part in parts)


def functions(*planes: str) -> str:
    """The files ``sql/functions/<plane>.sql``, joined in the order given.

    Function bodies are not checked against the schema while they are created (as ``pg_dump``
    restores them): a fresh database gets today's definitions from migration 0001, before the
    later migrations have added what they may refer to. Every function is still checked when it
    first runs, and views are always checked.
    """
    directory = resources.files(__package__).joinpath("functions")
    texts = [directory.joinpath(f"{plane}.sql").read_text() for plane in planes]
    return "\n".join(
        ["SET LOCAL check_function_bodies = off;", *texts, "RESET check_function_bodies;"]
    )
