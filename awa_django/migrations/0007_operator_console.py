"""What the admin's operator console needs from storage:

- A purge from the dead-letter queue forgets the job: awa.dlq_purge deletes the entry and, when
  the queue ring still holds the ready row and failed closure it was made from (the ring cannot
  delete them), records the job in awa.purged_jobs, which awa.jobs leaves out, so no page reads
  its arguments or errors and no retry finds it. Prune deletes a marker with the last ring slot
  holding a row of its job.
- awa.error_fingerprint(text) groups dead letters by their last error's message with numbers,
  ids and hex strings replaced.
- awa.run_now(bigint[]) moves scheduled and retryable jobs into the ready ring at once, through
  awa.ready_deferred, which awa.promote_due now uses too.

The reverse restores the earlier awa.jobs, awa.prune_queue_ring and awa.promote_due and drops
what this adds.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0006_task_priorities")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0007_operator_console", "up"),
            reverse_sql=sql.migration("0007_operator_console", "down"),
        ),
        migrations.RunSQL(
            sql=sql.functions("dlq", "rings", "promote", "jobs_view"),
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
