"""URLs of the shop app, mounted under ``/shop/``."""

from __future__ import annotations

from django.urls import path

from example_project.shop import provider, views

app_name = "shop"

urlpatterns = [
    path("orders/", views.create_order, name="create-order"),
    path("orders/rollback/", views.create_order_then_fail, name="create-order-then-fail"),
    # The fake payment provider collect_payment talks to (it would live elsewhere in real life).
    path("provider/charges/", provider.create_charge, name="provider-charges"),
]
