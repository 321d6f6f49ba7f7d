"""The notification centre: one person's notices, filtered, paged, marked read."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST, require_safe

from governance.choices import NotificationKind
from governance.parsing import whole_number
from governance.selectors.notifications import notifications_for
from governance.services.notifications import notifications_mark_read

PAGE_SIZE = 50


class NotificationFilterForm(forms.Form):
    """The centre's query string: one kind, unread only, a page."""

    kind = forms.ChoiceField(
        choices=[("", "Every kind"), *NotificationKind.choices], required=False
    )
    unread = forms.TypedChoiceField(
        choices=[("", "Read and unread"), ("1", "Unread only")],
        coerce=bool,
        empty_value=False,
        required=False,
        label="Show",
    )


@login_required
@require_safe
def notifications_page(request: HttpRequest) -> HttpResponse:
    """The signed-in user's notifications, newest first; a bad filter is a 400 naming it."""
    form = NotificationFilterForm(request.GET)
    page_text = request.GET.get("page") or "1"
    page_number = whole_number(page_text)
    if not form.is_valid() or page_number is None or page_number < 1:
        if page_number is None or page_number < 1:
            form.add_error(None, f"page: Enter a page number, not {page_text[:40]!r}.")
        return render(request, "governance/notifications.html", {"form": form}, status=400)
    rows = notifications_for(
        user=request.user, kind=form.cleaned_data["kind"], unread=form.cleaned_data["unread"]
    )
    paginator = Paginator(rows, PAGE_SIZE)
    page = paginator.get_page(min(page_number, paginator.num_pages))
    return render(request, "governance/notifications.html", {"form": form, "page": page})


@login_required
@require_POST
def notifications_read(request: HttpRequest) -> HttpResponse:
    """Mark one notification read (``id``) or all of them; back to where the button was."""
    ids = None
    if "id" in request.POST:
        pk = whole_number(request.POST["id"])
        ids = [pk] if pk is not None else []
    changed = notifications_mark_read(user=request.user, ids=ids)
    if ids is None:
        messages.success(request, f"{changed} notification{'s' * (changed != 1)} marked read.")
    target = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = ""
    return redirect(target or "notifications")


@login_required
@require_POST
def notification_open(request: HttpRequest, pk: int) -> HttpResponse:
    """Mark one notification read and go to what it is about."""
    row = notifications_for(user=request.user).filter(pk=pk).first()
    if row is None:
        return redirect("notifications")
    notifications_mark_read(user=request.user, ids=[row.pk])
    link = row.link if row.link.startswith("/") and not row.link.startswith("//") else ""
    return redirect(link or "notifications")


urlpatterns = [
    path("", notifications_page, name="notifications"),
    path("read/", notifications_read, name="notifications-read"),
    path("<int:pk>/open/", notification_open, name="notification-open"),
]
