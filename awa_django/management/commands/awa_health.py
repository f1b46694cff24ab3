"""``manage.py awa_health``: exit 0 when healthy, 1 when not (for probes and cron)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from django.core.management.base import BaseCommand

from awa_django.management.output import to_json
from awa_django.ops import health


class Command(BaseCommand):
    help = (
        "Check the database, migrations, a live maintenance leader and that every declared "
        "queue has a live worker; exit 0 when all pass, 1 otherwise."
    )
    # The command checks the database itself; Django's own checks would fail first otherwise.
    requires_system_checks = ()
    requires_migrations_checks = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        report = health.check()
        if options["json"]:
            self.stdout.write(to_json(report.as_dict()))
        else:
            for check in report.checks:
                self.stdout.write(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {check.detail}")
            self.stdout.write("healthy" if report.healthy else "unhealthy")
        if not report.healthy:
            sys.exit(1)
