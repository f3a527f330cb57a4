from django.apps import AppConfig


class SimulationsConfig(AppConfig):
    name = "simulations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from simulations.limits import check_limits  # noqa: PLC0415 - settings are ready only here

        check_limits()  # web budget < web timeout, run lease > the run's hard time limit (ImproperlyConfigured)
