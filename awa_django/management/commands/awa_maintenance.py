"""``manage.py awa_maintenance``: compete for maintenance leadership and, while leading, run
the cluster-wide maintenance tasks; runs no jobs. For deployments that want maintenance in a
dedicated process (start workers with ``--no-maintenance`` then, or let both compete)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand

from awa_django.conf import get_settings
from awa_django.declarations.jobs import registry
from awa_django.management.command import database_option, require_migrated
from awa_django.management.process import (
    add_log_format_argument,
    configure_logging,
    run_process,
)
from awa_django.worker.process import WorkerGroup, configs_per_database


class Command(BaseCommand):
    help = "Run the awa maintenance leader loop (promotion, rescue, rings, retention) alone."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--database",
            default=None,
            metavar="ALIAS",
            help="Lead the maintenance of this DATABASES alias only (default: every database "
            "holding a queue, each with its own leader).",
        )
        add_log_format_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        configure_logging(self.stderr, options["verbosity"], options["log_format"])
        conf = get_settings()
        # The worker's process root with no queues, one per database: its pool, session,
        # reporter and maintainer only.
        configs = configs_per_database(
            conf, queues={}, database=database_option(options["database"])
        )
        for config in configs:
            require_migrated(config.database)
        run_process(lambda: WorkerGroup(configs, registry.get), self.stdout, self.stderr)
