"""Calibration on a team's own cluster: import nccl-tests output and training logs, fit the fleet's
efficiencies over the engine's own equations, and predict with them.

Contract (issue #16)::

    from engine.calibration.fit import fit_profile
    from engine.calibration.nccl import parse_nccl_tests
    from engine.calibration.steplog import parse_step_log

* :func:`parse_nccl_tests` - nccl-tests stdout -> collective, ranks, rows (out-of-place and in-place).
* :func:`parse_step_log` - Megatron-LM / NeMo / torchtitan / CSV step logs -> steady step time, warm-up dropped.
* :func:`parse_gpu_telemetry` - nvidia-smi CSV / dcgmi dmon -> mean power and SM activity (optional).
* :func:`fit_profile` - least-squares fit -> :class:`Profile` (values, uncertainty, data, residual factor).
* :func:`predict_calibrated` - predict() with a profile applied; ``engine.performance.calibrated.apply_profile`` is the hook.

Method and equations: docs/calibration.md. Pure Python + numpy/scipy; no Django.
"""
