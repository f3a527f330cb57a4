"""Fabric Planner Django project."""

from planner.celery import app as celery_app

__all__ = ["celery_app"]
