"""Users with different admin permissions, and clients logged in as them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client


def staff_user(username: str, codenames: list[str]) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="awa_django", codename__in=codenames)
    )
    return user


@pytest.fixture
def operator_client(awa_db: None) -> Client:
    """A superuser: may do everything."""
    client = Client()
    client.force_login(User.objects.create_superuser("operator", password="pw"))
    return client


@pytest.fixture
def viewer_client(awa_db: None) -> Client:
    """Staff with only the view permissions of the awa pages."""
    client = Client()
    client.force_login(
        staff_user(
            "viewer",
            [
                "view_job",
                "view_deadletter",
                "view_queue",
                "view_queuedescriptor",
                "view_kinddescriptor",
                "view_runtimeinstance",
            ],
        )
    )
    return client


@pytest.fixture
def outsider_client(awa_db: None) -> Client:
    """Staff without any awa permission."""
    client = Client()
    client.force_login(staff_user("outsider", []))
    return client
