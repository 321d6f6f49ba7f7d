"""The notification centre: one person's notices, filtered, paged, marked read."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST, require_safe

from governance.choices import DeliveryState, EmailChoice, NotificationKind
from governance.models import EmailDelivery, Organization, OrganizationWebhook, WebhookDelivery
from governance.parsing import whole_number
from governance.selectors.notifications import notifications_for
from governance.services.notification_mail import (
    notification_prefs,
    notification_prefs_set,
    unsubscribe_read,
)
from governance.services.notifications import notifications_mark_read
from governance.services.webhooks import webhook_set
from governance.views.common import visibility_of

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
    context = {
        "form": form,
        "page": page,
        "is_org_admin": bool(visibility_of(request).admin_org_ids),
    }
    return render(request, "governance/notifications.html", context)


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


class PreferencesForm(forms.Form):
    """One choice per kind: in the app only, or also by e-mail at once."""

    def __init__(self, *args, initial_choices: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        for kind, label in NotificationKind.choices:
            self.fields[kind] = forms.ChoiceField(
                label=label, choices=EmailChoice.choices, initial=initial_choices[kind]
            )


@login_required
def notification_preferences(request: HttpRequest) -> HttpResponse:
    """Which kinds also come by e-mail (GET shows, POST saves)."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    current = notification_prefs(user=request.user)
    form = PreferencesForm(
        request.POST if request.method == "POST" else None, initial_choices=current
    )
    context = {"form": form, "email": request.user.email}
    if request.method != "POST":
        return render(request, "governance/notification_preferences.html", context)
    if not form.is_valid():
        return render(request, "governance/notification_preferences.html", context, status=400)
    notification_prefs_set(user=request.user, choices=form.cleaned_data)
    messages.success(request, "Your notification settings are saved.")
    return redirect("notification-preferences")


@csrf_exempt  # mail clients send the one-click POST of List-Unsubscribe without a session
def notification_unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    """Stop e-mails of one kind from a mail's signed link: GET asks (mail scanners open
    links), POST does it. No sign-in needed; a token that is not ours is a 404."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    found = unsubscribe_read(token)
    if found is None:
        raise Http404("This link is not valid.")
    user, kind = found
    label = NotificationKind(kind).label
    if request.method == "POST":
        notification_prefs_set(user=user, choices={kind: EmailChoice.OFF})
        return render(
            request, "governance/notification_unsubscribe.html", {"label": label, "done": True}
        )
    return render(request, "governance/notification_unsubscribe.html", {"label": label})


class WebhookForm(forms.Form):
    """An organization's webhook: an http(s) URL, on or off."""

    url = forms.URLField(
        label="Webhook URL",
        max_length=500,
        assume_scheme="https",
        help_text="A chat tool's incoming webhook (Slack, Mattermost, Rocket.Chat, Zulip's "
        "Slack-compatible one) or your own receiver: it gets JSON with a <code>text</code>.",
    )
    enabled = forms.BooleanField(required=False, initial=True, label="Post events")

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        if not url.lower().startswith(("https://", "http://")):
            raise forms.ValidationError("Give an http:// or https:// address.")
        return url


WEBHOOK_ROWS_SHOWN = 50


@login_required
def organization_webhook(request: HttpRequest) -> HttpResponse:
    """Org admins: the organization's webhook (set, turn off) and what failed to reach
    people: webhook posts and e-mails that were given up, newest first."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    vis = visibility_of(request)
    organizations = list(Organization.objects.filter(pk__in=vis.admin_org_ids).order_by("name"))
    if not organizations:
        raise PermissionDenied("Only org admins set their organization's webhook.")
    chosen = whole_number(request.GET.get("organization") or "") or organizations[0].pk
    organization = next((o for o in organizations if o.pk == chosen), None)
    if organization is None:
        raise Http404("No such organization among yours.")
    hook = OrganizationWebhook.objects.filter(organization=organization).first()
    initial = {"url": hook.url, "enabled": hook.enabled} if hook else {"enabled": True}
    form = WebhookForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST":
        if form.is_valid():
            webhook_set(
                organization=organization,
                url=form.cleaned_data["url"],
                enabled=form.cleaned_data["enabled"],
                actor=request.user,
            )
            messages.success(request, f"The webhook of {organization.name} is saved.")
            return redirect(f"{request.path}?organization={organization.pk}")
        status = 400
    else:
        status = 200
    deliveries = (
        WebhookDelivery.objects.filter(webhook__organization=organization).order_by(
            "-created_at", "-id"
        )[:WEBHOOK_ROWS_SHOWN]
        if hook
        else []
    )
    failed_emails = (
        EmailDelivery.objects.filter(
            state=DeliveryState.FAILED, notification__organization=organization
        )
        .select_related("notification")
        .order_by("-created_at", "-id")[:WEBHOOK_ROWS_SHOWN]
    )
    context = {
        "form": form,
        "organization": organization,
        "organizations": organizations,
        "hook": hook,
        "deliveries": deliveries,
        "failed_emails": failed_emails,
    }
    return render(request, "governance/organization_webhook.html", context, status=status)


urlpatterns = [
    path("", notifications_page, name="notifications"),
    path("read/", notifications_read, name="notifications-read"),
    path("<int:pk>/open/", notification_open, name="notification-open"),
    path("preferences/", notification_preferences, name="notification-preferences"),
    path("webhook/", organization_webhook, name="organization-webhook"),
    path("unsubscribe/<str:token>/", notification_unsubscribe, name="notifications-unsubscribe"),
]
