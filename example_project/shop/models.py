"""The example shop's data: orders, and an outbox of the e-mails the jobs "sent".

The outbox stands in for an e-mail provider: a job that sends mail writes a row here, so the
demo and the tests can see exactly which jobs ran (and prove that a rolled-back one did not).
"""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    """A customer's order; its jobs fill in the timestamps as they run."""

    class Status(models.TextChoices):
        PLACED = "placed", "Placed"
        PAID = "paid", "Paid"
        CANCELLED = "cancelled", "Cancelled"

    customer_email = models.EmailField()
    amount = models.DecimalField(max_digits=10, decimal_places=2)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PLACED)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set by the send_receipt job.
    receipt_sent_at = models.DateTimeField(null=True, blank=True)
    # Set by the async notify_warehouse job.
    warehouse_notified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"Order #{self.pk} ({self.customer_email}, {self.amount})"


class SentEmail(models.Model):
    """One e-mail a job sent, with the id of the job that sent it."""

    to = models.EmailField()
    subject = models.CharField(max_length=200)
    # Not a foreign key: the order may be deleted while its mail history is kept.
    order_id = models.BigIntegerField(null=True, blank=True)
    job_id = models.BigIntegerField(db_index=True)
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-sent_at",)

    def __str__(self) -> str:
        return f"{self.subject} -> {self.to}"
