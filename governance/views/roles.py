"""The "People and roles" page (``/people/``): see, grant and revoke roles.

For org admins (every role of their organization) and program managers (PI and researcher
on their program's projects) — the rule is ``governance.selectors.roles``. Everyone else gets
the 403 page. Grants and revocations go through ``governance.services.roles`` and so into
the audit trail; a refused grant is shown next to the field it names (400).
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path
from django.views.decorators.http import require_http_methods, require_POST

from governance.selectors.roles import (
    role_assignments_manageable,
    role_label,
    role_managers_anywhere,
    role_scopes_grantable,
    scope_label,
)
from governance.services.roles import MAX_REASON_LENGTH, role_grant, role_revoke
from governance.views.common import visibility_of

app_name = "people"


class RoleGrantForm(forms.Form):
    """Who gets which role where; the choices are what this manager may grant."""

    username = forms.CharField(max_length=150, label="User name")
    grant = forms.ChoiceField(label="Role")
    reason = forms.CharField(
        max_length=MAX_REASON_LENGTH, required=False, label="Reason (kept in the audit trail)"
    )

    def __init__(self, *args, options, **kwargs):
        super().__init__(*args, **kwargs)
        self.options = {f"{role}@{key}": (role, scope) for role, key, scope in options}
        self.fields["grant"].choices = [("", "Choose a role and where…")] + [
            (value, f"{role_label(role)} — {scope_label(scope)}")
            for value, (role, scope) in self.options.items()
        ]

    def clean_username(self):
        name = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=name, is_active=True).first()
        if user is None:
            raise ValidationError(f"No active user is called {name!r}.")
        return user


def _require_manager(request: HttpRequest):
    vis = visibility_of(request)
    if not role_managers_anywhere(visibility=vis):
        raise PermissionDenied("Roles are managed by org admins and program managers.")
    return vis


def _page(request: HttpRequest, vis, form: RoleGrantForm, status: int = 200) -> HttpResponse:
    assignments = list(role_assignments_manageable(visibility=vis))
    for a in assignments:
        a.scope_text = scope_label(a.scope)
    return render(
        request,
        "governance/roles.html",
        {"form": form, "assignments": assignments, "reason_max": MAX_REASON_LENGTH},
        status=status,
    )


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def roles_page(request: HttpRequest) -> HttpResponse:
    """Everyone holding a role this user manages; POST grants one."""
    vis = _require_manager(request)
    options = role_scopes_grantable(visibility=vis)
    if request.method != "POST":
        return _page(request, vis, RoleGrantForm(options=options))
    form = RoleGrantForm(request.POST, options=options)
    if form.is_valid():
        role, scope = form.options[form.cleaned_data["grant"]]
        user = form.cleaned_data["username"]
        try:
            role_grant(
                actor=request.user,
                user=user,
                role=role,
                scope=scope,
                reason=form.cleaned_data["reason"],
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error("grant" if field in ("role", "scope") else field, errors)
        else:
            messages.success(
                request, f"{user.username} is now {role_label(role)} of {scope_label(scope)}."
            )
            return redirect("people:roles")
    return _page(request, vis, form, status=400)


@login_required
@require_POST
def role_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Take one role away (the page's "Revoke" button)."""
    vis = _require_manager(request)
    assignment = get_object_or_404(role_assignments_manageable(visibility=vis), pk=pk)
    what = (
        f"{assignment.user.username} is no longer {role_label(assignment.role)} "
        f"of {scope_label(assignment.scope)}."
    )
    try:
        role_revoke(
            actor=request.user,
            assignment=assignment,
            reason=request.POST.get("reason", "")[:MAX_REASON_LENGTH],
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, what)
    return redirect("people:roles")


urlpatterns = [
    path("", roles_page, name="roles"),
    path("<int:pk>/revoke/", role_revoke_view, name="revoke"),
]
