"""What every awa admin page shares: custom views behind a ModelAdmin, permission gates, render.

Each page is a ModelAdmin over an unmanaged model (awa_django.models) whose URLs are replaced by
views of our own: the model gives the admin index entry, breadcrumbs and Django's
view/change/delete permissions; the views read through awa_django.storage with keyset pages
instead of the changelist's counts and offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connections, transaction
from django.db.backends.utils import CursorWrapper
from django.forms import Form
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, register_converter, reverse

from awa_django.conf import get_settings
from awa_django.exceptions import UnknownDatabase
from awa_django.limits import MAX_ID
from awa_django.storage.browse import bounded_statements, is_statement_timeout

View = Callable[..., HttpResponse]


class JobIdConverter:
    """``<awa_job_id:job_id>``: an int from 1 to bigint's largest. Any other digits do not match
    the route, so the admin answers 404 instead of handing PostgreSQL an id it cannot hold."""

    regex = "[0-9]+"

    def to_python(self, value: str) -> int:
        # int() itself refuses more than 4300 digits; both refusals mean "no such route".
        number = int(value)
        if not 1 <= number <= MAX_ID:
            raise ValueError(f"job id out of range: {value}")
        return number

    def to_url(self, value: int) -> str:
        return str(value)


# Registered once, when the admin modules are first imported (admin autodiscovery).
register_converter(JobIdConverter, "awa_job_id")


# The database the page being answered shows and acts on (its ``?database=``), set by
# OperatorAdmin.bounded for the length of the view; None outside a view: DATABASE_ALIAS.
_DATABASE: ContextVar[str | None] = ContextVar("awa_admin_database", default=None)


def selected_database() -> str:
    """The alias the current admin page shows and acts on: its ``?database=`` (queues in
    several databases), else ``AWA['DATABASE_ALIAS']``."""
    return _DATABASE.get() or get_settings().DATABASE_ALIAS


def page_database() -> str | None:
    """The ``?database=`` the page was asked for, or None: for the calls whose default is
    the queue's own database."""
    return _DATABASE.get()


def chosen_database(request: HttpRequest) -> str | None:
    """The ``?database=`` a request names (GET, or the query string of a POST's action URL),
    checked: ``UnknownDatabase`` for an alias holding no queue; None when not given."""
    given = request.GET.get("database")
    if not given:
        return None
    return get_settings().operator_database(given)


@contextmanager
def on_database(alias: str | None) -> Iterator[None]:
    token = _DATABASE.set(alias)
    try:
        yield
    finally:
        _DATABASE.reset(token)


def awa_reverse(viewname: str, args: Iterable[object] | None = None) -> str:
    """``reverse`` keeping the page's ``?database=`` when one other than ``DATABASE_ALIAS`` is
    selected, so links and action forms act on the database shown."""
    url = reverse(viewname, args=list(args) if args is not None else None)
    alias = _DATABASE.get()
    if alias is None or alias == get_settings().DATABASE_ALIAS:
        return url
    return f"{url}?{urlencode({'database': alias})}"


def awa_cursor() -> CursorWrapper:
    """A cursor on the database the page shows (``selected_database()``)."""
    return connections[selected_database()].cursor()


def query_with(query: QueryDict, **changes: object) -> str:
    """``query`` re-encoded with ``changes`` applied (None removes a key), for page links."""
    updated = query.copy()
    for key, value in changes.items():
        if value is None:
            updated.pop(key, None)
        else:
            updated[key] = str(value)
    return updated.urlencode()


def queue_choices() -> list[tuple[str, str]]:
    """The queues declared in ``AWA["QUEUES"]``, as form choices."""
    return [(name, name) for name in sorted(get_settings().QUEUES)]


def report_form_errors(request: HttpRequest, form: Form) -> None:
    """Each invalid field of an action form as an error message naming the field."""
    for field, errors in form.errors.items():
        messages.error(request, f"{field}: {' '.join(str(error) for error in errors)}")


def in_db(message: str) -> str:
    """An admin log message naming the database acted on, when more than one holds queues."""
    if len(get_settings().databases) < 2:
        return message
    return f"{message} (database {selected_database()})"


def database_context(request: HttpRequest) -> dict[str, Any]:
    """What the database selector include reads: the choices (only when more than one
    database holds queues) and the one shown; the other query parameters are kept."""
    conf = get_settings()
    databases = conf.databases
    if len(databases) < 2:
        return {}
    chosen = page_database()
    return {
        "awa_databases": databases,
        # Appended to a link to another row's page; "" for DATABASE_ALIAS.
        "awa_database_query": (
            f"?{urlencode({'database': chosen})}"
            if chosen and chosen != conf.DATABASE_ALIAS
            else ""
        ),
        # The same, appended to a link that already has a query string.
        "awa_database_param": (
            f"&{urlencode({'database': chosen})}"
            if chosen and chosen != conf.DATABASE_ALIAS
            else ""
        ),
        "awa_database": selected_database(),
        "awa_database_keep": [
            (key, value)
            for key, values in request.GET.lists()
            # Another database starts at its first page.
            if key not in ("database", "before", "newer", "before_at", "before_id")
            for value in values
        ],
    }


def acting_user_id(request: HttpRequest) -> int | str:
    """The primary key of the user acting, for the admin log."""
    user_id = request.user.pk
    if user_id is None:  # admin_view lets only logged-in staff this far
        raise PermissionDenied
    return user_id


class JobIdsField(forms.Field):
    """Repeated ``job_ids`` values (ticked rows) as a list of job ids in bigint's range; the
    action itself says which of them it could act on."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[int]:
        if not value:
            raise ValidationError("select at least one job")
        try:
            ids = [int(item) for item in value]
        except (TypeError, ValueError):
            raise ValidationError("job ids must be whole numbers") from None
        if not 1 <= min(ids) <= max(ids) <= MAX_ID:
            raise ValidationError(f"job ids must be whole numbers from 1 to {MAX_ID}")
        return ids


class Committed:
    """How many objects a bulk action has committed so far, kept outside it so that the part
    done is known when a statement timeout stops it midway. Called with a running total (a
    ``progress`` callback), or ``add``-ed to."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, total: int) -> None:
        self.count = total

    def add(self, count: int) -> None:
        self.count += count


class OperatorAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A ModelAdmin whose pages are the views ``operator_urls`` returns. Nothing is added
    through the admin: jobs enter through enqueue, queues through use."""

    # Whether the page reads ``?database=`` (queues in several databases); workflows live in
    # AWA['DATABASE_ALIAS'] alone.
    per_database = True

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def operator_urls(self) -> list[tuple[str, View, str]]:
        """(route, view, name suffix) for each page; the changelist is the one named ''."""
        raise NotImplementedError

    def get_urls(self) -> list[URLPattern]:
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path(
                route,
                self.admin_site.admin_view(self.bounded(view)),
                name=f"{prefix}_{suffix or 'changelist'}",
            )
            for route, view, suffix in self.operator_urls()
        ]

    def bounded(self, view: View) -> View:
        """``view`` with each of its statements (its template's included) cancelled by
        PostgreSQL after ``AWA['ADMIN_STATEMENT_TIMEOUT_MS']``: a page the operator gave up on
        leaves no query running, and one that ran out of time says so (503) instead of
        failing with a 500."""

        @wraps(view)
        def run(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            conf = get_settings()
            try:
                chosen = chosen_database(request) if self.per_database else None
            except UnknownDatabase as error:
                return HttpResponseBadRequest(str(error))
            # The page reads the database selected, and DATABASE_ALIAS for what lives only there
            # (workflows, the held steps of a list): both are bounded.
            aliases = dict.fromkeys([conf.DATABASE_ALIAS, chosen or conf.DATABASE_ALIAS])
            try:
                with ExitStack() as stack:
                    stack.enter_context(on_database(chosen))
                    for alias in aliases:
                        stack.enter_context(
                            bounded_statements(alias, conf.ADMIN_STATEMENT_TIMEOUT_MS)
                        )
                    response = view(request, *args, **kwargs)
                    if isinstance(response, TemplateResponse):
                        response.render()
                    return response
            except Exception as error:
                if not is_statement_timeout(error):
                    raise
                for alias in aliases:
                    if connections[alias].in_atomic_block:
                        # ATOMIC_REQUESTS: the request's transaction failed with the statement.
                        transaction.set_rollback(True, using=alias)
                return self.timed_out(request, conf.ADMIN_STATEMENT_TIMEOUT_MS)

        return run

    def timed_out(self, request: HttpRequest, timeout_ms: int) -> HttpResponse:
        response = self.render(
            request,
            "statement_timeout.html",
            "The database took too long",
            {"timeout_ms": timeout_ms, "acted": request.method == "POST", "live_refresh": False},
        )
        response.status_code = 503
        return response

    def url_name(self, suffix: str) -> str:
        return f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_{suffix}"

    def require_view(self, request: HttpRequest) -> None:
        if not self.has_view_permission(request):
            raise PermissionDenied

    def require_change(self, request: HttpRequest) -> None:
        if not self.has_change_permission(request):
            raise PermissionDenied

    def require_delete(self, request: HttpRequest) -> None:
        if not self.has_delete_permission(request):
            raise PermissionDenied

    def log_operator_action(
        self, request: HttpRequest, keys: Iterable[object], message: str, *, flag: int = CHANGE
    ) -> None:
        """Record an action that took effect in Django's admin log, one entry per object acted
        on (``keys`` are primary keys of this page's model), so it shows in "Recent actions"
        and the history an auditor reads, with who did it and when."""
        LogEntry.objects.log_actions(
            acting_user_id(request), [self.model(pk=key) for key in keys], flag, in_db(message)
        )

    def log_cut_short(
        self,
        request: HttpRequest,
        error: BaseException,
        done: int,
        description: str,
        summary: str,
        *,
        flag: int,
    ) -> None:
        """Record the committed part of an action on everything a filter matched when the
        statement timeout stopped it (the caller then re-raises, and the page answers 503):
        its batches stay done, so the log says how many and that the rest was not. Nothing is
        recorded when the error is another one, nothing was done, or the request's own
        transaction (ATOMIC_REQUESTS) rolls the batches back with it."""
        if not done or not is_statement_timeout(error):
            return
        if connections[selected_database()].in_atomic_block:
            return
        self.log_filter_action(
            request,
            description,
            f"{summary} Cut short by the statement timeout "
            "(AWA['ADMIN_STATEMENT_TIMEOUT_MS']); the rest was not done.",
            flag=flag,
        )

    def log_filter_action(
        self, request: HttpRequest, description: str, message: str, *, flag: int
    ) -> None:
        """Record an action on something that is not one row of this page's model (everything
        a filter matched, a cron schedule), as one admin log entry on this page's model with no
        object id, ``description`` naming what it covered."""
        LogEntry.objects.create(
            user_id=acting_user_id(request),
            content_type=ContentType.objects.get_for_model(self.model),
            object_id=None,
            object_repr=description[:200],
            action_flag=flag,
            change_message=in_db(message),
        )

    def render(
        self, request: HttpRequest, template: str, title: str, context: Mapping[str, Any]
    ) -> TemplateResponse:
        return TemplateResponse(
            request,
            f"admin/awa_django/{template}",
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": title,
                "has_change_permission": self.has_change_permission(request),
                "has_delete_permission": self.has_delete_permission(request),
                "changelist_url_name": self.url_name("changelist"),
                "detail_url_name": self.url_name("change"),
                # A page answering a GET can fetch its own URL again; a confirmation page
                # answers a POST and must not.
                "live_refresh": request.method == "GET",
                **(database_context(request) if self.per_database else {}),
                **context,
            },
        )


class ReadOnlyOperatorAdmin(OperatorAdmin):
    """A page that only shows: nobody changes or deletes through it."""

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
