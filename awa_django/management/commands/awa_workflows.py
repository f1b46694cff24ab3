"""``manage.py awa_workflows list|show|cancel|retry``: read and cancel workflows, retry a failed
step (docs/workflows.md)."""

from __future__ import annotations

import argparse
from typing import Any, Final

from django.core.management.base import CommandError

from awa_django.management.command import QueueCommand
from awa_django.management.output import name, row_limit, table, to_json, whole_number
from awa_django.producer import workflows

STATES: Final = ("running", "completed", "failed", "cancelled")
workflow_id = whole_number(1, 2**63 - 1, what="a workflow id")


class Command(QueueCommand):
    help = (
        "List workflows (newest first), show one with its steps, cancel one (every step "
        "that has not ended), or retry a step that failed (resuming its workflow)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        listing = actions.add_parser("list", help="Workflows, newest first.")
        listing.add_argument("--state", choices=STATES)
        listing.add_argument("--name", type=name)
        listing.add_argument("--limit", type=row_limit, default=50)
        listing.add_argument("--json", action="store_true")
        show = actions.add_parser("show", help="One workflow and its steps.")
        show.add_argument("workflow_id", type=workflow_id, metavar="ID")
        show.add_argument("--json", action="store_true")
        cancel = actions.add_parser("cancel", help="Cancel every step that has not ended.")
        cancel.add_argument("workflow_id", type=workflow_id, metavar="ID")
        cancel.add_argument("--reason", type=name, default="cancelled by an operator")
        retry = actions.add_parser(
            "retry", help="Run a failed or dead-lettered step again and resume its workflow."
        )
        retry.add_argument("workflow_id", type=workflow_id, metavar="ID")
        retry.add_argument("step", type=name, metavar="STEP")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "list":
            rows = workflows.list_workflows(
                state=options["state"], name=options["name"], limit=options["limit"]
            )
            if options["json"]:
                self.stdout.write(to_json(rows))
                return
            self.stdout.write(
                table(
                    ("id", "name", "state", "steps", "unfinished", "failures", "created"),
                    [
                        (
                            w.workflow_id,
                            w.name,
                            w.state,
                            w.steps,
                            w.unfinished,
                            w.failures,
                            w.created_at.isoformat(timespec="seconds"),
                        )
                        for w in rows
                    ],
                )
            )
        elif action == "show":
            state = workflows.get_workflow(options["workflow_id"])
            if state is None:
                raise CommandError(f"no workflow {options['workflow_id']}")
            if options["json"]:
                self.stdout.write(to_json({"workflow": state.workflow, "steps": list(state.steps)}))
                return
            w = state.workflow
            self.stdout.write(f"workflow {w.workflow_id} {w.name!r}: {w.state} {state.counts}")
            self.stdout.write(
                table(
                    ("step", "job", "state", "after", "error"),
                    [
                        (
                            s.name,
                            s.job_id,
                            s.state,
                            ",".join(s.after) or None,
                            None if s.error is None else _reason(s.error),
                        )
                        for s in state.steps
                    ],
                )
            )
        elif action == "retry":
            wf, step = options["workflow_id"], options["step"]
            if not workflows.retry_workflow_step(wf, step):
                refusal = workflows.retry_refusal(workflows.get_workflow(wf), step)
                raise CommandError(f"workflow {wf}: {refusal or 'the step changed meanwhile'}")
            self.stdout.write(f"retried step {step!r} of workflow {wf}: it runs again")
        else:
            cancelled = workflows.cancel_workflow(options["workflow_id"], reason=options["reason"])
            if cancelled is None:
                raise CommandError(f"workflow {options['workflow_id']} is not running")
            self.stdout.write(f"cancelled workflow {options['workflow_id']}: {cancelled} steps")


def _reason(error: dict[str, Any]) -> str:
    text = str(error.get("reason") or error.get("message") or error.get("type") or "")
    return text if len(text) <= 60 else text[:57] + "..."
