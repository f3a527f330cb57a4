from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts import schema  # noqa: F401, PLC0415  (registers the OpenAPI auth extension once apps are loaded)
