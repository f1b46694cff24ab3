"""Unmanaged models over awa's tables and views, for the Django admin.

They exist so the admin can register a page per operator surface and so Django creates the
usual view/change/delete permissions for each; migrations create no tables for them
(``managed = False``), the schema belongs to the SQL migrations. Each declares only its primary
key: the pages read through ``awa_django.storage`` and the Python API (keyset pages, no
counts), never through these models, so nothing here can drift from the SQL. See
docs/architecture.md, "Admin".
"""

from __future__ import annotations

from django.db import models


class Job(models.Model):
    """A job in any state (the ``awa.jobs`` view). ``change`` allows cancel and retry."""

    job_id = models.BigIntegerField(primary_key=True)

    class Meta:
        managed = False
        # Django quotes db_table as one identifier; the inner quotes make it "awa"."jobs".
        db_table = 'awa"."jobs'
        verbose_name = "job"

    def __str__(self) -> str:
        return f"job {self.job_id}"


class DeadLetter(models.Model):
    """A job held in the dead-letter queue (``awa.dlq_entries``). ``change`` allows retry,
    ``delete`` allows purge."""

    job_id = models.BigIntegerField(primary_key=True)

    class Meta:
        managed = False
        db_table = 'awa"."dlq_entries'
        verbose_name = "dead-letter job"
        verbose_name_plural = "dead-letter queue"

    def __str__(self) -> str:
        return f"dead-letter job {self.job_id}"


class Queue(models.Model):
    """A queue's control row. ``change`` allows pause, resume and drain."""

    queue = models.TextField(primary_key=True)

    class Meta:
        managed = False
        db_table = 'awa"."queue_meta'
        verbose_name = "queue health"
        verbose_name_plural = "queue health"

    def __str__(self) -> str:
        return self.queue


class QueueDescriptor(models.Model):
    """What code declares about a queue (``awa.queue_descriptors``), with stale/drift badges."""

    queue = models.TextField(primary_key=True)

    class Meta:
        managed = False
        db_table = 'awa"."queue_descriptors'
        verbose_name = "queue descriptor"

    def __str__(self) -> str:
        return self.queue


class KindDescriptor(models.Model):
    """What code declares about a job kind (``awa.kind_descriptors``)."""

    kind = models.TextField(primary_key=True)

    class Meta:
        managed = False
        db_table = 'awa"."kind_descriptors'
        verbose_name = "job kind descriptor"

    def __str__(self) -> str:
        return self.kind


class RuntimeInstance(models.Model):
    """A live worker or maintenance process (``awa.runtime_instances``)."""

    instance_id = models.TextField(primary_key=True)

    class Meta:
        managed = False
        db_table = 'awa"."runtime_instances'
        verbose_name = "runtime"

    def __str__(self) -> str:
        return self.instance_id


class Workflow(models.Model):
    """A workflow and its steps (``awa.workflows``, docs/workflows.md). ``change`` allows cancel."""

    workflow_id = models.BigIntegerField(primary_key=True)

    class Meta:
        managed = False
        db_table = 'awa"."workflows'
        verbose_name = "workflow"

    def __str__(self) -> str:
        return f"workflow {self.workflow_id}"
