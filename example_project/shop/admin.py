"""Admin pages for the shop's orders and its e-mail outbox."""

from __future__ import annotations

from django.contrib import admin

from example_project.shop.models import Order, SentEmail


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ("id", "customer_email", "amount", "status", "created_at", "receipt_sent_at")
    list_filter = ("status",)
    search_fields = ("customer_email",)
    date_hierarchy = "created_at"


@admin.register(SentEmail)
class SentEmailAdmin(admin.ModelAdmin):
    list_display = ("id", "to", "subject", "order_id", "job_id", "sent_at")
    search_fields = ("to", "subject", "=job_id", "=order_id")
    # Written only by jobs: the admin is for looking, not editing.
    readonly_fields = ("to", "subject", "order_id", "job_id", "sent_at")
