"""URLs of the example project: the admin and the shop's JSON endpoints."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("shop/", include("example_project.shop.urls")),
]
