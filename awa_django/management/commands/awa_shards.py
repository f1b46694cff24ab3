"""``manage.py awa_shards QUEUE [N]``: show a queue's enqueue shards and per-lane backlog, or
set how many shards it has."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError

from awa_django.exceptions import InvalidJob
from awa_django.management.command import QueueCommand
from awa_django.management.output import name, whole_number
from awa_django.ops.shards import (
    MAX_ENQUEUE_SHARDS,
    get_enqueue_shards,
    lane_backlog,
    set_enqueue_shards,
)


class Command(QueueCommand):
    help = (
        "Show QUEUE's enqueue shard count and waiting jobs per lane, or set the count to N "
        f"(1..{MAX_ENQUEUE_SHARDS}; FIFO then holds within a shard, see docs/scheduling.md)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("queue", type=name, metavar="QUEUE")
        parser.add_argument(
            "shards",
            nargs="?",
            type=whole_number(1, MAX_ENQUEUE_SHARDS, what="shards"),
            default=None,
            metavar="N",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        queue: str = options["queue"]
        try:
            if options["shards"] is not None:
                set_enqueue_shards(queue, options["shards"])
            shards = get_enqueue_shards(queue)
            backlog = lane_backlog(queue)
        except InvalidJob as error:
            # N is checked by its argument type: what the API can still refuse is the queue.
            raise CommandError(f"QUEUE: {error}") from None
        self.stdout.write(f"queue {queue}: {shards} enqueue shard(s)")
        for lane in backlog:
            self.stdout.write(
                f"  priority {lane.priority} shard {lane.shard}: {lane.waiting} waiting"
            )
