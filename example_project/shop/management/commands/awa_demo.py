"""``manage.py awa_demo``: the example shop's story, from enqueue to every job outcome.

It migrates, places orders through the JSON views (one of which rolls back), enqueues one job
per outcome from code, runs an in-process burst worker with a short retry backoff, and prints
what became of every job. Each job's final state, attempts and errors are checked against what
the story says must happen, as are the jobs' effects on the orders; any mismatch is listed and
the command exits non-zero, so ``make demo`` doubles as an end-to-end check.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from io import StringIO
from itertools import pairwise
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.test import Client, override_settings

import awa_django as awa
from awa_django.conf import get_settings
from awa_django.declarations.discovery import discover_jobs
from awa_django.declarations.jobs import registry
from awa_django.ops.shards import set_enqueue_shards
from awa_django.worker.process import RunSummary, WorkerProcess, config_from_settings
from example_project.shop import jobs
from example_project.shop.models import Order, SentEmail

# A kind no module registers: what a queue holds after a deploy removed a handler. This process
# may still enqueue it only because the demo lists it in AWA["EXTERNAL_KINDS"], as another
# service's kind; the worker waits UNKNOWN_KIND_TIMEOUT_S for one that knows it, then fails it.
RETIRED_KIND = "shop.print_invoice"
UNKNOWN_KIND_TIMEOUT_S = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """What the story says must become of one job."""

    story: str
    job_id: int
    state: str
    attempt: int
    # Pickups by a worker (the job's run_lease): attempts plus snoozes; None when it depends on
    # timing (the tries of a job no worker knows, backing off within a timeout).
    pickups: int | None
    errors: int
    # Substring of the last error's message (or cancel reason), when there must be one.
    last_error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RolledBack:
    """An order and a job written in a transaction that rolled back."""

    how: str
    order_id: int
    job_id: int


@dataclass(slots=True)
class Story:
    """Everything the demo enqueued, and the checks its outcome must pass."""

    expected: list[Expected] = field(default_factory=list)
    rolled_back: list[RolledBack] = field(default_factory=list)
    # (description, check) pairs on the jobs' side effects, run after the worker.
    effects: list[tuple[str, Callable[[], bool]]] = field(default_factory=list)
    invalid_rejected: bool = False


def classify(record: awa.JobRecord) -> str:
    """The summary bucket of a finished job."""
    if record.state == "completed":
        if record.errors:
            return "retried, then completed"
        if record.run_lease > record.attempt:
            return "snoozed, then completed"
        return "completed first time"
    return record.state


def last_error(record: awa.JobRecord) -> str:
    if not record.errors:
        return ""
    entry = record.errors[-1]
    if "reason" in entry:
        return f"reason: {entry['reason']}"
    return f"{entry.get('type', '?').rsplit('.', 1)[-1]}: {entry.get('message', '')}"


@contextmanager
def quiet_logger(name: str, level: int) -> Iterator[None]:
    """Raise a logger's level for the duration, so the report is not interleaved with logs."""
    logger = logging.getLogger(name)
    previous = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(previous)


class Command(BaseCommand):
    help = (
        "Run the example shop's story: orders placed through the views, one job per outcome, "
        "a burst worker, and a checked report. Exits non-zero if any job ends unexpectedly."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--backoff",
            type=float,
            default=0.2,
            metavar="SECONDS",
            help="Retry backoff base for this run (AWA['RETRY_BACKOFF_BASE_S']), default 0.2.",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=45.0,
            metavar="SECONDS",
            help="Stop the worker and fail if the jobs have not all finished by then.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["backoff"] <= 0:
            raise CommandError("--backoff must be positive")
        # Quietly: the demo's output is the story, not the migration list.
        call_command("migrate", interactive=False, verbosity=0, stdout=StringIO())
        # Retries are due after backoff_base * 2**(attempt-1) seconds; a short base keeps the
        # whole story within a few seconds. Everything else comes from the project's AWA.
        awa_settings = {
            **settings.AWA,
            "RETRY_BACKOFF_BASE_S": options["backoff"],
            "EXTERNAL_KINDS": [RETIRED_KIND],
            "UNKNOWN_KIND_TIMEOUT_S": UNKNOWN_KIND_TIMEOUT_S,
        }
        # Unless asked for (-v 2), the worker's per-job warnings would drown the report.
        log_level = logging.INFO if options["verbosity"] >= 2 else logging.ERROR
        with override_settings(AWA=awa_settings), quiet_logger("awa_django", log_level):
            story = Story()
            self.out("awa_django demo: a small shop places orders; jobs do the rest.\n")
            self.out("1. Enqueue, in the same transactions as the shop's own writes")
            alice, bob = self.enqueue_through_views(story)
            self.enqueue_from_code(story, alice=alice, bob=bob)
            self.out("")
            self.out(f"2. Run a burst worker (retry backoff base {options['backoff']}s)")
            summary, elapsed, timed_out = self.run_worker(options["timeout"])
            self.out(
                f"   drained in {elapsed:.1f}s: {summary.claimed} pickups, "
                f"{summary.written} results written"
            )
            self.out("")
            failures = self.report(story)
        if timed_out:
            failures.insert(0, f"the worker did not drain within {options['timeout']}s")
        self.out("")
        if failures:
            for failure in failures:
                self.stderr.write(f"   FAIL {failure}")
            raise CommandError(f"the demo's story did not hold: {len(failures)} check(s) failed")
        self.stdout.write(self.style.SUCCESS("Demo OK: every job ended as the story says."))

    def out(self, line: str) -> None:
        self.stdout.write(line)

    # -- 1. enqueue -------------------------------------------------------------------------

    def enqueue_through_views(self, story: Story) -> tuple[int, int]:
        """Orders placed over HTTP: the view writes the order and enqueues in one transaction.

        Returns the ids of the two orders placed, which the jobs from code then work on.
        """
        client = Client()
        placed: list[int] = []
        for email, amount in (("alice@example.com", "42.00"), ("bob@example.com", "19.90")):
            response = client.post(
                "/shop/orders/",
                {"email": email, "amount": amount},
                content_type="application/json",
            )
            if response.status_code != 201:
                raise CommandError(
                    f"POST /shop/orders/ answered {response.status_code}: {response.content!r}"
                )
            body = response.json()
            placed.append(body["order_id"])
            self.out(
                f"   POST /shop/orders/           -> {response.status_code}: order "
                f"#{body['order_id']}, send_receipt job #{body['job_id']}"
            )
            story.expected.append(
                Expected(
                    story=f"receipt for {email}",
                    job_id=body["job_id"],
                    state="completed",
                    attempt=1,
                    pickups=1,
                    errors=0,
                )
            )
            story.effects.append(self.receipt_sent(body["order_id"], body["job_id"]))

        response = client.post(
            "/shop/orders/rollback/",
            {"email": "mallory@example.com", "amount": "999.00"},
            content_type="application/json",
        )
        body = response.json()
        if response.status_code != 409:
            raise CommandError(f"POST /shop/orders/rollback/ answered {response.status_code}")
        self.out(
            f"   POST /shop/orders/rollback/  -> {response.status_code}: order "
            f"#{body['rolled_back_order_id']} and job #{body['rolled_back_job_id']} were written, "
            "then the view raised: both rolled back"
        )
        story.rolled_back.append(
            RolledBack(
                how="POST /shop/orders/rollback/",
                order_id=body["rolled_back_order_id"],
                job_id=body["rolled_back_job_id"],
            )
        )
        alice, bob = placed
        return alice, bob

    def enqueue_from_code(self, story: Story, *, alice: int, bob: int) -> None:
        """One job per outcome, enqueued from code, plus a rollback and a rejected enqueue."""
        exp = story.expected.append
        first = len(story.expected)

        job_id = jobs.notify_warehouse.enqueue(order_id=alice)
        exp(
            Expected(
                story="async handler",
                job_id=job_id,
                state="completed",
                attempt=1,
                pickups=1,
                errors=0,
            )
        )
        story.effects.append(
            (
                f"notify_warehouse (async) stamped order #{alice}",
                lambda: Order.objects.get(pk=alice).warehouse_notified_at is not None,
            )
        )

        # A scheduled job: not runnable until run_at, then picked first (priority 1).
        job_id = awa.enqueue(
            jobs.fulfil_order,
            args={"order_id": alice},
            run_at=timedelta(seconds=0.5),
            priority=1,
            tags=["scheduled"],
        )
        exp(
            Expected(
                story="scheduled 0.5s ahead",
                job_id=job_id,
                state="completed",
                attempt=1,
                pickups=1,
                errors=0,
            )
        )
        story.effects.append(self.ran_after_run_at(job_id))

        job_id = jobs.sync_inventory.enqueue(sku="MUG-01")
        exp(
            Expected(
                story="fails twice, then succeeds",
                job_id=job_id,
                state="completed",
                attempt=3,
                pickups=3,
                errors=2,
                last_error="attempt 2",
            )
        )

        job_id = jobs.call_partner_webhook.enqueue(url="https://partner.invalid/hook")
        exp(
            Expected(
                story="always fails (3 attempts)",
                job_id=job_id,
                state="failed",
                attempt=3,
                pickups=3,
                errors=3,
                last_error="refused the connection",
            )
        )

        job_id = jobs.check_payment.enqueue(order_id=bob)
        exp(
            Expected(
                story="RetryAfter, then paid",
                job_id=job_id,
                state="completed",
                attempt=2,
                pickups=2,
                errors=1,
                last_error="still pending",
            )
        )
        story.effects.append(
            (
                f"check_payment marked order #{bob} paid",
                lambda: Order.objects.get(pk=bob).status == Order.Status.PAID,
            )
        )

        job_id = jobs.wait_for_stock.enqueue(sku="MUG-01")
        exp(
            Expected(
                story="Snooze (max_attempts=1)",
                job_id=job_id,
                state="completed",
                attempt=1,
                pickups=2,
                errors=0,
            )
        )

        # A unique job: asking for the same reminder again returns the queued one.
        job_id = jobs.send_payment_reminder.enqueue(order_id=bob)
        again = awa.enqueue(
            jobs.send_payment_reminder, args={"order_id": bob}, on_conflict="return"
        )
        if again != job_id:
            raise CommandError(f"unique reminder enqueued twice: jobs #{job_id} and #{again}")
        self.out(
            f"   send_payment_reminder twice for order #{bob} -> one job (#{job_id}): "
            "awa.Unique dedupes"
        )
        exp(
            Expected(
                story="unique: second enqueue deduped",
                job_id=job_id,
                state="completed",
                attempt=1,
                pickups=1,
                errors=0,
            )
        )

        with transaction.atomic():
            carol = Order.objects.create(
                customer_email="carol@example.com",
                amount=Decimal("5.00"),
                status=Order.Status.CANCELLED,
            )
            job_id = jobs.fulfil_order.enqueue(order_id=carol.pk)
        exp(
            Expected(
                story="Cancel: order was cancelled",
                job_id=job_id,
                state="cancelled",
                attempt=1,
                pickups=1,
                errors=1,
                last_error="cancelled by the customer",
            )
        )
        story.effects.append(
            (
                f"no shipping e-mail for cancelled order #{carol.pk}",
                lambda: not SentEmail.objects.filter(order_id=carol.pk).exists(),
            )
        )

        with transaction.atomic():
            dave = Order.objects.create(customer_email="dave@example.com", amount=Decimal("70"))
            job_id = jobs.charge_card.enqueue(order_id=dave.pk, card_number="4000000000000002")
        exp(
            Expected(
                story="TerminalError: card declined",
                job_id=job_id,
                state="failed",
                attempt=1,
                pickups=1,
                errors=1,
                last_error="was declined",
            )
        )
        story.effects.append(
            (
                f"declined order #{dave.pk} stayed unpaid",
                lambda: Order.objects.get(pk=dave.pk).status == Order.Status.PLACED,
            )
        )

        job_id = awa.enqueue(RETIRED_KIND, args={"order_id": alice}, max_attempts=1)
        exp(
            Expected(
                # Its tries wait for a worker that knows the kind without using the one
                # attempt, and share one error entry; the try after the timeout fails it.
                story="no worker knows its kind",
                job_id=job_id,
                state="failed",
                attempt=1,
                pickups=None,
                errors=2,
                last_error="No worker that claimed it knew its kind",
            )
        )

        self.enqueue_partner_events(story, alice=alice, bob=bob)

        # Bulk: three imported orders and their receipts, the jobs written with one COPY.
        with transaction.atomic():
            imported = Order.objects.bulk_create(
                Order(customer_email=f"import{n}@example.com", amount=Decimal(10 * n))
                for n in (1, 2, 3)
            )
            bulk_ids = jobs.send_receipt.enqueue_many([{"order_id": o.pk} for o in imported])
        for order, job_id in zip(imported, bulk_ids, strict=True):
            exp(
                Expected(
                    story="enqueue_many (COPY)",
                    job_id=job_id,
                    state="completed",
                    attempt=1,
                    pickups=1,
                    errors=0,
                )
            )
            story.effects.append(self.receipt_sent(order.pk, job_id))

        # The same rollback as the view's, written out: the job is part of the transaction.
        rolled_back: dict[str, int] = {}
        try:
            with transaction.atomic():
                order = Order.objects.create(customer_email="eve@example.com", amount=Decimal(1))
                rolled_back = {
                    "order_id": order.pk,
                    "job_id": jobs.send_receipt.enqueue(order_id=order.pk),
                }
                raise RuntimeError("stock check failed after the writes")
        except RuntimeError:
            pass
        story.rolled_back.append(RolledBack(how="atomic block in code", **rolled_back))

        ids = [e.job_id for e in story.expected[first:]]
        self.out(
            f"   code: jobs #{min(ids)}..#{max(ids)}, one per outcome (async, scheduled, "
            "retries, RetryAfter, Snooze, Cancel, TerminalError, unknown kind, enqueue_many)"
        )
        self.out(
            f"   code: atomic block -> order #{rolled_back['order_id']} and job "
            f"#{rolled_back['job_id']} written, then an exception: both rolled back"
        )

        # Bad arguments never reach the database.
        try:
            jobs.send_receipt.enqueue(order_id="forty-two")  # type: ignore[arg-type]
        except awa.InvalidJob as exc:
            story.invalid_rejected = exc.field == "args.order_id"
            self.out(f"   code: send_receipt.enqueue(order_id='forty-two') -> InvalidJob: {exc}")

    def enqueue_partner_events(self, story: Story, *, alice: int, bob: int) -> None:
        """Order events for a partner: a rate-limited queue split into shards, each order's
        events kept in order by its ordering key."""
        set_enqueue_shards("partners", 4)
        events = ("placed", "paid", "shipped")
        for order_id in (alice, bob):
            ids = [
                awa.enqueue(
                    jobs.push_order_event,
                    args={"order_id": order_id, "event": event},
                    ordering_key=f"order-{order_id}",
                )
                for event in events
            ]
            for job_id in ids:
                story.expected.append(
                    Expected(
                        story="ordering_key, rate limit",
                        job_id=job_id,
                        state="completed",
                        attempt=1,
                        pickups=1,
                        errors=0,
                    )
                )
            story.effects.append(self.finished_in_order(order_id, ids))
        self.out(
            "   code: 2 orders x 3 partner events on 'partners' (4 shards, 5 jobs/s fleet-wide), "
            "ordering_key per order"
        )

    def finished_in_order(
        self, order_id: int, job_ids: list[int]
    ) -> tuple[str, Callable[[], bool]]:
        def check() -> bool:
            records = {r.job_id: r for r in awa.get_jobs(job_ids)}
            finished = [records[j].finalized_at for j in job_ids if j in records]
            return len(finished) == len(job_ids) and all(
                a is not None and b is not None and a < b for a, b in pairwise(finished)
            )

        return f"order #{order_id}'s partner events finished in the order they happened", check

    def receipt_sent(self, order_id: int, job_id: int) -> tuple[str, Callable[[], bool]]:
        def check() -> bool:
            order = Order.objects.get(pk=order_id)
            mailed = SentEmail.objects.filter(order_id=order_id, job_id=job_id).count()
            return order.receipt_sent_at is not None and mailed == 1

        return f"send_receipt #{job_id} e-mailed order #{order_id} exactly once", check

    def ran_after_run_at(self, job_id: int) -> tuple[str, Callable[[], bool]]:
        def check() -> bool:
            record = awa.get_job(job_id)
            return (
                record is not None
                and record.finalized_at is not None
                and record.run_at is not None
                and record.finalized_at >= record.run_at
            )

        return f"scheduled job #{job_id} ran no earlier than its run_at", check

    # -- 2. work ----------------------------------------------------------------------------

    def run_worker(self, timeout_s: float) -> tuple[RunSummary, float, bool]:
        """Run an in-process burst worker, like ``manage.py awa_worker --burst``."""
        discover_jobs()
        # burst_wait: also wait for retries and snoozes due within that many seconds, so the
        # burst ends only when every job of the story is finished.
        config = config_from_settings(get_settings(), burst=True, burst_wait_s=10.0)
        timed_out = False

        async def run() -> RunSummary:
            nonlocal timed_out
            worker = WorkerProcess(config, registry.get)

            def give_up() -> None:
                nonlocal timed_out
                timed_out = True
                worker.request_stop()

            watchdog = asyncio.get_running_loop().call_later(timeout_s, give_up)
            try:
                return await worker.run()
            finally:
                watchdog.cancel()

        started = time.monotonic()
        summary = asyncio.run(run())
        return summary, time.monotonic() - started, timed_out

    # -- 3. report --------------------------------------------------------------------------

    def report(self, story: Story) -> list[str]:
        """Print every job's fate and the summary; return the checks that failed."""
        failures: list[str] = []
        records = {r.job_id: r for r in awa.get_jobs([e.job_id for e in story.expected])}
        self.out("3. What became of each job")
        self.out(
            f"   {'job':>5}  {'kind':<26} {'story':<30} {'state':<10} {'att.':<5} "
            f"{'pickups':<7}  last error / reason"
        )
        counts: dict[str, int] = {}
        for exp in story.expected:
            record = records.get(exp.job_id)
            if record is None:
                failures.append(f"job #{exp.job_id} ({exp.story}) is missing")
                continue
            counts[classify(record)] = counts.get(classify(record), 0) + 1
            self.out(
                f"   {'#' + str(record.job_id):>5}  {record.kind:<26} {exp.story:<30} "
                f"{record.state:<10} {f'{record.attempt}/{record.max_attempts}':<5} "
                f"{record.run_lease:<7}  {last_error(record)[:70]}"
            )
            failures += self.check_record(exp, record)

        self.out("")
        self.out("4. Summary")
        for bucket in (
            "completed first time",
            "retried, then completed",
            "snoozed, then completed",
            "failed",
            "cancelled",
        ):
            self.out(f"   {bucket:<25} {counts.get(bucket, 0)}")
        others = {
            k: v
            for k, v in counts.items()
            if k
            not in {
                "completed first time",
                "retried, then completed",
                "snoozed, then completed",
                "failed",
                "cancelled",
            }
        }
        if others:
            failures.append(f"jobs left unfinished: {others}")
        for description, check in story.effects:
            ok = check()
            self.out(f"   {'ok ' if ok else 'NOT'} {description}")
            if not ok:
                failures.append(description)
        if not story.invalid_rejected:
            failures.append("send_receipt.enqueue(order_id='forty-two') was not rejected")

        self.out("")
        self.out("5. The rolled-back enqueues")
        for rb in story.rolled_back:
            order_exists = Order.objects.filter(pk=rb.order_id).exists()
            job = awa.get_job(rb.job_id)
            mails = SentEmail.objects.filter(job_id=rb.job_id).count()
            never = not order_exists and job is None and mails == 0
            self.out(
                f"   {rb.how}: order #{rb.order_id} exists: {'yes' if order_exists else 'no'}; "
                f"awa.get_job({rb.job_id}): {'found' if job else 'None'}; e-mails sent by job "
                f"#{rb.job_id}: {mails}"
            )
            if never:
                self.out(
                    f"   => rolled-back job #{rb.job_id} and order #{rb.order_id} never "
                    "existed and never ran"
                )
            else:
                failures.append(f"rolled-back job #{rb.job_id} / order #{rb.order_id} survived")
        return failures

    def check_record(self, exp: Expected, record: awa.JobRecord) -> list[str]:
        found = {
            "state": record.state,
            "attempt": record.attempt,
            "pickups": record.run_lease,
            "errors": len(record.errors),
        }
        wanted = {
            "state": exp.state,
            "attempt": exp.attempt,
            "pickups": exp.pickups,
            "errors": exp.errors,
        }
        problems = [
            f"job #{exp.job_id} ({exp.story}): {name} is {found[name]!r}, expected {want!r}"
            for name, want in wanted.items()
            if want is not None and found[name] != want
        ]
        if exp.last_error and exp.last_error not in last_error(record):
            problems.append(
                f"job #{exp.job_id} ({exp.story}): last error {last_error(record)!r} does not "
                f"mention {exp.last_error!r}"
            )
        return problems
