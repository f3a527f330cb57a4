"""The /api/v1/ router. Domain apps register their viewsets here."""

from rest_framework.routers import DefaultRouter

from accounts.api import ApiTokenViewSet, MeViewSet, TeamViewSet

router = DefaultRouter()
router.register("me", MeViewSet, basename="me")
router.register("teams", TeamViewSet, basename="team")
router.register("tokens", ApiTokenViewSet, basename="token")

urlpatterns = router.urls
