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


class _AwaTable(models.Model):
    """What every model here shares: unmanaged, named by its key."""

    class Meta:
        abstract = True
        managed = False

    def __str__(self) -> str:
        # A row keyed by a number is named with what it is ("job 12"), one keyed by a name by
        # that name.
        return f"{self._meta.verbose_name} {self.pk}" if isinstance(self.pk, int) else str(self.pk)


class Job(_AwaTable):
    """A job in any state (the ``awa.jobs`` view). ``change`` allows cancel and retry."""

    job_id = models.BigIntegerField(primary_key=True)

    class Meta(_AwaTable.Meta):
        # Django quotes db_table as one identifier; the inner quotes make it "awa"."jobs".
        db_table = 'awa"."jobs'
        verbose_name = "job"


class DeadLetter(_AwaTable):
    """A job held in the dead-letter queue (``awa.dlq_entries``). ``change`` allows retry,
    ``delete`` allows purge."""

    job_id = models.BigIntegerField(primary_key=True)

    class Meta(_AwaTable.Meta):
        db_table = 'awa"."dlq_entries'
        verbose_name = "dead-letter job"
        verbose_name_plural = "dead-letter queue"


class Queue(_AwaTable):
    """A queue's control row. ``change`` allows pause, resume and drain."""

    queue = models.TextField(primary_key=True)

    class Meta(_AwaTable.Meta):
        db_table = 'awa"."queue_meta'
        verbose_name = "queue health"
        verbose_name_plural = "queue health"


class QueueDescriptor(_AwaTable):
    """What code declares about a queue (``awa.queue_descriptors``), with stale/drift badges."""

    queue = models.TextField(primary_key=True)

    class Meta(_AwaTable.Meta):
        db_table = 'awa"."queue_descriptors'
        verbose_name = "queue descriptor"


class KindDescriptor(_AwaTable):
    """What code declares about a job kind (``awa.kind_descriptors``)."""

    kind = models.TextField(primary_key=True)

    class Meta(_AwaTable.Meta):
        db_table = 'awa"."kind_descriptors'
        verbose_name = "job kind descriptor"


class RuntimeInstance(_AwaTable):
    """A live worker or maintenance process (``awa.runtime_instances``)."""

    instance_id = models.TextField(primary_key=True)

    class Meta(_AwaTable.Meta):
        db_table = 'awa"."runtime_instances'
        verbose_name = "runtime"


class Workflow(_AwaTable):
    """A workflow and its steps (``awa.workflows``, docs/workflows.md). ``change`` allows cancel."""

    workflow_id = models.BigIntegerField(primary_key=True)

    class Meta(_AwaTable.Meta):
        db_table = 'awa"."workflows'
        verbose_name = "workflow"
