"""Browser pages of the budget domain."""

from django.urls import path

from governance import views

urlpatterns = [
    path("", views.home, name="home"),
]
