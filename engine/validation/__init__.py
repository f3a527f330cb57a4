"""Validation of the performance model against published training runs (issue #22).

Published runs only validate the engine: no constant is set from them. One module per concept:

* ``runs``: the sets (engine/validation/data/*_runs.json), loading them, and a row's source (publication).
* ``rows``: a run predicted and compared like with like (``ValidationRow``, ``validation_rows``, ``summary``).
* ``registry``: the engine constants derived from rows, with the hook that refits them (none has one today;
  the constants grounded on end-to-end rows are listed there as a defect).
* ``loso``: leave-one-source-out predictions through the registry's refit hooks.
* ``bands``: the 80% error bands per regime, their LOSO fit and coverage, error_bands.json and ``band_for``.
* ``scaling``: series of one model measured at several sizes by one source, measured vs predicted change.
* ``evaluate``: one pass over every set that computes all of the above; ``report`` and ``notes``:
  docs/validation.md; ``plots``: docs/img/validation_scaling.png when matplotlib is installed; ``summary``: the
  same figures as data (accuracy_summary.json) for the portal's accuracy page and GET /api/v1/accuracy/.

``manage.py validation_report`` (``make validation``) writes the report, the band table, the summary and the plot.
"""
