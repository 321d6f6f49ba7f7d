"""The demo's accounts: one per persona, with passwords printed for people trying the product."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password

from governance.choices import Role
from governance.management.demo.tree import PI_PROGRAM, PI_PROJECT, DemoTree
from governance.models import RoleAssignment

# username, password, what the account is. Passwords pass Django's validators (checked).
DEMO_ACCOUNTS = [
    ("admin", "budget-admin-h100", "Org admin of Philly Research; Django admin"),
    ("manager", "vision-manager-h100", "Program manager of Vision"),
    ("pi", "project-lead-6214", "PI of VC 6214e9"),
    ("researcher", "researcher-6214-gpu", "Researcher in VC 6214e9"),
    ("finance", "finance-reports-h100", "Finance: reads the whole organization"),
    ("outsider", "outsider-sees-nothing", "No role: sees nothing"),
]


def demo_accounts_ensure(created: list[str]) -> dict:
    """Every demo account by username, each made when missing (named in ``created``); an
    existing account keeps its password."""
    User = get_user_model()
    users = {}
    for username, password, _ in DEMO_ACCOUNTS:
        user, new = User.objects.get_or_create(
            username=username, defaults={"email": f"{username}@philly.example.org"}
        )
        if new:
            validate_password(password, user)
            user.set_password(password)
            if username == "admin":
                user.is_staff = user.is_superuser = True
            user.save()
            _verified_email(user)
            created.append(f"account {username}")
        users[username] = user
    return users


def _verified_email(user) -> None:
    # Sign-in by e-mail works without a verification round trip for demo accounts.
    from allauth.account.models import EmailAddress

    EmailAddress.objects.get_or_create(
        user=user, email=user.email, defaults={"verified": True, "primary": True}
    )


def demo_roles_ensure(tree: DemoTree, users: dict, created: list[str]) -> None:
    """Each persona's role on the demo tree, made when missing (named in ``created``)."""
    pi_project = tree.projects[PI_PROJECT]
    roles = [
        (users["admin"], Role.ORG_ADMIN, {"organization": tree.organization}),
        (users["finance"], Role.FINANCE, {"organization": tree.organization}),
        (users["manager"], Role.PROGRAM_MANAGER, {"program": tree.programs[PI_PROGRAM]}),
        (users["pi"], Role.PI, {"project": pi_project}),
        (users["researcher"], Role.RESEARCHER, {"project": pi_project}),
    ]
    for user, role, scope in roles:
        _, new = RoleAssignment.objects.get_or_create(user=user, role=role, **scope)
        if new:
            created.append(f"role {role} for {user.username}")


def demo_accounts_table() -> list[str]:
    """The demo accounts as the lines of a text table: username, password, role."""
    header = ("Username", "Password", "Role")
    rows = [header, *DEMO_ACCOUNTS]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    line = "  +-" + "-+-".join("-" * w for w in widths) + "-+"
    lines = [line]
    for i, row in enumerate(rows):
        lines.append(
            "  | " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        )
        if i == 0:
            lines.append(line)
    lines.append(line)
    return lines
