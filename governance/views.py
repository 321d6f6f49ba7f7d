"""Browser pages of the budget domain: thin views over services and selectors."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Landing page after sign-in."""
    return render(request, "home.html")
