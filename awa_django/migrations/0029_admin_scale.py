"""The leader's rescue records how far back it has closed every silent attempt
(``awa.rescue_marks``), so the open attempts ("what is running", its count, the bulk walk, the
workers page, the queues' running depths) are read from the leases and the receipts claimed
since, not from every retained receipt (issue #36).

The reverse puts ``awa.find_rescuable`` back as it was and drops the table and the two
functions.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0028_search_index_cost")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0029_admin_scale", "up") + sql.functions("rescue"),
            reverse_sql=sql.migration("0029_admin_scale", "down"),
        ),
    ]
