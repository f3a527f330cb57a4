"""TEMPORARY re-export for tests/portal/test_capacity_pages.py (see tests/domain/__init__.py); holds no tests."""

from tests.simulations.api.test_capacity_plans import PLAN

__all__ = ["PLAN"]
