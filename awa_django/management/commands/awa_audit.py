"""``manage.py awa_audit``: check the substrate's invariants on the live database, read-only;
exit 0 when every one holds, 1 when one is broken."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from awa_django.management.command import QueueCommand, add_database_argument, chosen_database
from awa_django.management.output import to_json
from awa_django.ops import audit


class Command(QueueCommand):
    help = (
        "Check the queue's invariants on the live database without writing or blocking "
        "anything: print each as held or broken with the jobs concerned; exit 0 when all hold, "
        "1 otherwise."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
        add_database_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        # Each database holding queues has its own invariants: one report per run.
        report = audit.run(using=chosen_database(options))
        if options["json"]:
            self.stdout.write(to_json(report.as_dict()))
        else:
            for finding in report.findings:
                if finding.held:
                    self.stdout.write(f"held   {finding.name}: {finding.description}")
                else:
                    more = "" if finding.broken <= len(finding.ids) else ", ..."
                    ids = ", ".join(str(i) for i in finding.ids)
                    self.stdout.write(
                        f"BROKEN {finding.name}: {finding.description}; {finding.broken} "
                        f"{finding.unit}(s): {ids}{more}"
                    )
            self.stdout.write("all invariants hold" if report.held else "invariants broken")
        if not report.held:
            sys.exit(1)
