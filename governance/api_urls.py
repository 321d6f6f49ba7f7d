"""REST API routes: one router for the budget domain (and, later, the scheduler)."""

from rest_framework.routers import DefaultRouter

router = DefaultRouter()

urlpatterns = router.urls
