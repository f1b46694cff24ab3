"""``manage.py awa_worker``: run jobs until stopped (or, with ``--burst``, until drained)."""

from __future__ import annotations

import argparse
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from awa_django.conf import QUEUE_NAME_PATTERN, get_settings
from awa_django.declarations.discovery import discover_jobs
from awa_django.declarations.jobs import registry
from awa_django.management.command import database_option, require_migrated
from awa_django.management.process import (
    add_log_format_argument,
    configure_logging,
    run_process,
)
from awa_django.worker.process import WorkerGroup, configs_per_database


def queue_option(value: str) -> tuple[str, int | None]:
    """Parse ``NAME`` or ``NAME=CONCURRENCY``."""
    name, _, concurrency = value.partition("=")
    if not QUEUE_NAME_PATTERN.match(name):
        raise argparse.ArgumentTypeError(f"invalid queue name {name!r}")
    if not concurrency:
        return name, None
    if not concurrency.isdigit() or int(concurrency) < 1:
        raise argparse.ArgumentTypeError(f"concurrency of {name!r} must be a positive integer")
    return name, int(concurrency)


def non_negative_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if seconds < 0:
        raise argparse.ArgumentTypeError("seconds must be >= 0")
    return seconds


class Command(BaseCommand):
    help = (
        "Run awa jobs from the configured queues until SIGTERM/SIGINT (or drained, with --burst)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--queue",
            dest="queues",
            action="append",
            type=queue_option,
            default=[],
            metavar="NAME[=CONCURRENCY]",
            help="Queue to work (repeatable); defaults to every queue in AWA['QUEUES'] with its "
            "configured concurrency.",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Exit once nothing is runnable or in flight (see --burst-wait).",
        )
        parser.add_argument(
            "--burst-wait",
            type=non_negative_seconds,
            default=0.0,
            metavar="SECONDS",
            help="In burst mode, also wait for scheduled or retrying jobs due within SECONDS.",
        )
        parser.add_argument(
            "--no-maintenance",
            action="store_true",
            help="Never become the maintenance leader (run awa_maintenance elsewhere instead).",
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=non_negative_seconds,
            default=None,
            metavar="SECONDS",
            help="How long a stopping worker lets in-flight jobs finish "
            "(default AWA['SHUTDOWN_TIMEOUT_S']).",
        )
        parser.add_argument(
            "--reload",
            dest="reload",
            action="store_true",
            default=None,
            help="Restart the worker when code changes, draining in-flight jobs first "
            "(default when DEBUG is on).",
        )
        parser.add_argument(
            "--noreload",
            dest="reload",
            action="store_false",
            help="Never restart on code changes (default when DEBUG is off).",
        )
        parser.add_argument(
            "--database",
            default=None,
            metavar="ALIAS",
            help="Serve only the queues of this DATABASES alias (a queue's 'database' option) and "
            "compete for its maintenance leadership alone (default: every database holding "
            "a served queue, each with its own connections and leader).",
        )
        add_log_format_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        configure_logging(self.stderr, options["verbosity"], options["log_format"])
        conf = get_settings()
        database = database_option(options["database"])
        queues: dict[str, int] = {}
        for name, concurrency in options["queues"]:
            if name not in conf.QUEUES:
                raise CommandError(
                    f"queue {name!r} is not declared in AWA['QUEUES'] "
                    f"(declared: {sorted(conf.QUEUES)})"
                )
            if database is not None and conf.queue_database(name) != database:
                raise CommandError(
                    f"queue {name!r} lives in database {conf.queue_database(name)!r}, not "
                    f"{database!r}; run a worker with --database {conf.queue_database(name)}"
                )
            queues[name] = concurrency or conf.QUEUES[name].concurrency
        if database is not None and not any(
            conf.queue_database(name) == database for name in conf.QUEUES
        ):
            raise CommandError(f"no queue of AWA['QUEUES'] lives in database {database!r}")
        reload = settings.DEBUG if options["reload"] is None else options["reload"]
        if options["burst"]:
            if options["reload"]:
                raise CommandError("--reload cannot be combined with --burst")
            reload = False
        if not reload:
            # Before the config: it carries the kind descriptors of every registered handler.
            discover_jobs()
        configs = configs_per_database(
            conf,
            queues=queues or None,
            database=database,
            burst=options["burst"],
            burst_wait_s=options["burst_wait"],
            shutdown_timeout_s=options["shutdown_timeout"],
            maintenance=not options["no_maintenance"],
        )
        for config in configs:
            require_migrated(config.database)
        if reload:
            from awa_django.management import reload as reloading

            reloading.run(configs)
            return
        run_process(lambda: WorkerGroup(configs, registry.get), self.stdout, self.stderr)
