"""TEMPORARY shim, removed once tests/portal/test_capacity_pages.py imports PLAN from its new home
(tests.simulations.api.test_capacity_plans). The domain tests moved to tests/planning, tests/simulations and
tests/accounts (tests mirror the apps); nothing else may be put here."""
