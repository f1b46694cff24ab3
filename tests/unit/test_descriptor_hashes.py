"""A declaration's hash is stored by every worker and compared across deploys: the fields
behind it and their hash must not change with the code that computes them."""

from __future__ import annotations

from awa_django.ops.descriptors import KindDeclaration, QueueDeclaration


def test_a_queue_declaration_hashes_what_it_says_of_the_queue():
    declared = QueueDeclaration(
        queue="email", display_name="E-mail", description="d", owner="o", dlq=True
    )
    assert declared.fields == {
        "display_name": "E-mail",
        "description": "d",
        "owner": "o",
        "dlq": True,
    }
    assert list(declared.fields) == ["display_name", "description", "owner", "dlq"]
    assert declared.hash == "e35ca1afdf960ab6"


def test_a_kind_declaration_hashes_what_it_says_of_the_kind():
    declared = KindDeclaration(kind="send", queue=None, description="d", owner="o", docs_url="u")
    assert declared.fields == {"queue": None, "description": "d", "owner": "o", "docs_url": "u"}
    assert list(declared.fields) == ["queue", "description", "owner", "docs_url"]
    assert declared.hash == "71b38a99492985f7"
