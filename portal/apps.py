from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    label = "portal"
    default_auto_field = "django.db.models.BigAutoField"
