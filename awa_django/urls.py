"""URLs of awa_django: include them under any prefix, e.g.
``path("awa/", include("awa_django.urls"))`` serves ``POST /awa/callbacks/<token>/<action>``."""

from __future__ import annotations

from django.urls import path

from awa_django.callbacks.views import callback

app_name = "awa_django"

urlpatterns = [
    path("callbacks/<str:token>/<str:action>", callback, name="callback"),
]
