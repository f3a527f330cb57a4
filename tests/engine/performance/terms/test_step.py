"""The micro-batch and the step (terms/step.py): step = m t_mb + (p-1)/v t_mb + DP + interference + optimizer +
stragglers, and the breakdown adds up to it."""

from __future__ import annotations

import dataclasses
from statistics import NormalDist

import numpy as np
import pytest

from engine.performance.model import step_terms
from engine.performance.terms.step import MicroBatchTime, step_time
from tests.engine.performance._build import build, dense_doc


def test_step_is_microbatches_plus_bubble_plus_step_level_terms() -> None:
    ctx, lay, shape = build(dense_doc(tp=8, pp=4, vpp=2, gb=64))
    dp = dataclasses.replace(step_terms(ctx, lay).data_parallel, exposed_s=np.array([0.05]), hidden_s=np.array([0.4]))
    mb = MicroBatchTime(compute_s=np.array([0.1]), interference_s=np.array([0.01]), tp_s=np.array([0.02]),
                        cp_s=np.array([0.0]), ep_s=np.array([0.0]), pp_s=np.array([0.003]), zero_s=np.array([0.0]),
                        total_s=np.array([0.133]))
    st = step_time(ctx, lay, shape, mb, dp, np.array([0.02]), np.array([0.0]))
    m = 64 / 2  # d = 2, b = 1
    bubble = 3 / 2 * 0.133
    z = NormalDist().inv_cdf
    strag = m * 0.1 * 0.008 * z((64 - 0.375) / (64 + 0.25))  # the slowest of 64 GPUs
    # network jitter, cv 0.029 x E[max Z_n]: TP over t = 8 ranks, the pipeline pair, the DP reduction over d = 2
    # (exposed 0.05 + interference 0.25 x 0.4)
    strag += 0.029 * (m * 0.02 * z(7.625 / 8.25) + m * 0.003 * z(1.625 / 2.25) + (0.05 + 0.25 * 0.4) * z(1.625 / 2.25))
    assert st.stragglers_s[0] == pytest.approx(strag, rel=1e-12)
    expected = m * 0.133 + bubble + 0.05 + 0.25 * 0.4 + 0.02 + strag
    assert st.step_s[0] == pytest.approx(expected, rel=1e-12)
    b = st.breakdown_s
    total = sum(float(getattr(b, f.name)[0]) for f in dataclasses.fields(b))
    assert total == pytest.approx(expected, rel=1e-12)
    assert b.compute[0] == pytest.approx(m * 0.11) and b.pp_bubble[0] == pytest.approx(bubble)
    assert st.network_s[0] == pytest.approx(m * (0.02 + 0.003) + 0.05 + 0.1, rel=1e-12)
