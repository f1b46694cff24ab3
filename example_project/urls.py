"""URLs of the example project: the admin, the shop's JSON endpoints and awa's callbacks."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("shop/", include("example_project.shop.urls")),
    path("awa/", include("awa_django.urls")),
]
