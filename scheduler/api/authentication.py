"""Agent tokens: accepted on the node agent endpoints and nowhere else.

The user endpoints keep the project's default authentication (session, user token), which
does not know agent tokens: an agent token there is an invalid token (401). The agent
endpoints use only ``AgentTokenAuthentication``, which does not know user tokens or sessions:
a user's token there is an invalid agent token (401), and a signed-in browser gets nothing.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

from governance.api.authentication import SecretLockoutMixin
from scheduler.models import NodeAgent
from scheduler.services.executor_reports import node_agent_authenticate

KEYWORD = "Token"


class _AgentTokenCheck(BaseAuthentication):
    """``Authorization: Token <agent token>`` → ``request.auth`` is the ``NodeAgent``.

    ``request.user`` stays anonymous: an agent is not a person and holds no role, so nothing
    that checks users (visibility, permissions of the budget API) can grant it anything.
    Invalid tokens count against the client address (``SecretLockoutMixin``).
    """

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != KEYWORD.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: Token <agent token>.")
        try:
            raw = parts[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Invalid token header.") from None
        agent = node_agent_authenticate(raw_token=raw)
        if agent is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked agent token.")
        return AnonymousUser(), agent

    def authenticate_header(self, request) -> str:
        return KEYWORD


class AgentTokenAuthentication(SecretLockoutMixin, _AgentTokenCheck):
    """Agent tokens (``_AgentTokenCheck``) under the address lockout for invalid ones."""

    keyword = KEYWORD


class IsNodeAgent(BasePermission):
    """Only a request authenticated by an agent token."""

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, NodeAgent)


class AgentTokenScheme(OpenApiAuthenticationExtension):
    """Describes agent tokens in the OpenAPI schema."""

    target_class = "scheduler.api.authentication.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "Token <agent token> (created by an org admin for one node)",
        }
