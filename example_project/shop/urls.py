"""URLs of the shop app, mounted under ``/shop/``."""

from __future__ import annotations

from django.urls import path

from example_project.shop import views

app_name = "shop"

urlpatterns = [
    path("orders/", views.create_order, name="create-order"),
    path("orders/rollback/", views.create_order_then_fail, name="create-order-then-fail"),
]
