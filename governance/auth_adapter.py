"""django-allauth adapter: accounts are created by administrators unless sign-up is enabled."""

from allauth.account.adapter import DefaultAccountAdapter
from django.conf import settings


class AccountAdapter(DefaultAccountAdapter):
    """Closes open sign-up unless ``ACCOUNT_ALLOW_REGISTRATION=true``.

    Budgets are handed out by role; a stranger creating an account would see nothing, so the
    default is to let administrators (or the OIDC provider) create accounts.
    """

    def is_open_for_signup(self, request) -> bool:
        """Return whether the sign-up form is offered."""
        return settings.ACCOUNT_ALLOW_REGISTRATION
