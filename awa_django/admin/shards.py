"""The shard page: every queue's enqueue shard count and, on request (``?live=1``), the jobs
waiting in each of its (priority, shard) lanes; read-only, under queue health (view
permission). Changing a count is ``manage.py awa_shards QUEUE N`` or
``awa_django.ops.shards.set_enqueue_shards``."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse

from awa_django.admin.base import OperatorAdmin, View, selected_database
from awa_django.conf import get_settings
from awa_django.ops import shards
from awa_django.storage.lanes import LaneBacklog


@dataclass(frozen=True, slots=True)
class QueueLanes:
    """A queue's shard count and its lanes that hold waiting jobs (none when not counted)."""

    queue: str
    declared: bool
    enqueue_shards: int
    lanes: list[LaneBacklog]

    @property
    def waiting(self) -> int:
        return sum(lane.waiting for lane in self.lanes)


def queue_lanes(*, count_waiting: bool, database: str | None = None) -> list[QueueLanes]:
    """Every queue declared in ``database`` (default ``AWA["DATABASE_ALIAS"]``), every queue
    there with a shard count of its own and, when ``count_waiting``, every queue with waiting
    jobs and its lanes, by name. Counting reads every waiting job, so it is asked for, as live
    depths are on queue health."""
    conf = get_settings()
    alias = conf.operator_database(database)
    declared = {name for name in conf.QUEUES if conf.queue_database(name) == alias}
    counts = shards.enqueue_shard_counts(database=alias)
    by_queue: dict[str, list[LaneBacklog]] = defaultdict(list)
    for lane in shards.all_lane_backlogs(database=alias) if count_waiting else []:
        by_queue[lane.queue].append(lane)
    return [
        QueueLanes(
            queue=name,
            declared=name in conf.QUEUES,
            enqueue_shards=counts.get(name, 1),
            lanes=by_queue[name],
        )
        for name in sorted(set(declared) | set(counts) | set(by_queue))
    ]


class ShardViews(OperatorAdmin):
    """The shard page, for the queue health admin to serve under ``shards/``."""

    def shard_urls(self) -> list[tuple[str, View, str]]:
        return [("shards/", self.shard_changelist, "shards")]

    def shard_changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        live = request.GET.get("live") == "1"
        return self.render(
            request,
            "queue_shards.html",
            "Queue shards and lanes",
            {
                "queues": queue_lanes(count_waiting=live, database=selected_database()),
                "live": live,
            },
        )
