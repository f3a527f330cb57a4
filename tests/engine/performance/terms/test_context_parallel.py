"""Context-parallel communication (terms/context_parallel.py): 3 all-gathers of the full sequence's K and V per
layer, hidden under the attention core except 10% of the ring."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.performance.terms.attention import attention_core
from engine.performance.terms.context_parallel import context_parallel_comm
from tests.engine.performance._build import BW, LinearComm, build, dense_doc


def _cp(attn_fwd: float, attn_bwd: float, cp: int = 4):
    ctx, lay, shape = build(dense_doc(tp=8, cp=cp, gpus=64, gb=16))
    attn = dataclasses.replace(attention_core(ctx, lay, shape), forward_s=np.array([attn_fwd]),
                               backward_s=np.array([attn_bwd]))
    return context_parallel_comm(ctx, lay, shape, attn, LinearComm())


def test_ring_moves_k_and_v_of_the_whole_sequence_three_times() -> None:
    """Llama-2-7B (32 KV heads of 128, TP 8: 512 wide per rank), s 4096, b 1: K and V, bf16."""
    kv_bytes = 1 * 4096 * 2 * 512 * 2.0
    cp = _cp(0.0, 0.0)
    assert cp.kv_bytes[0] == pytest.approx(kv_bytes, rel=1e-12)
    assert cp.raw_s[0] == pytest.approx(3.0 * kv_bytes / BW, rel=1e-12)
    assert cp.exposed_s[0] == pytest.approx(3.0 * kv_bytes / BW, rel=1e-12)


def test_attention_hides_all_but_a_tenth_of_the_ring() -> None:
    raw = 3.0 * 4096 * 2 * 512 * 2.0 / BW
    long = _cp(raw, raw)
    assert long.floor_s[0] == pytest.approx(0.1 * raw, rel=1e-12)
    assert long.exposed_s[0] == pytest.approx(0.1 * raw, rel=1e-12)
    part = _cp(0.3 * raw, 0.2 * raw)
    assert part.exposed_s[0] == pytest.approx(0.5 * raw, rel=1e-12)


def test_no_context_parallelism_no_traffic() -> None:
    none = _cp(0.0, 0.0, cp=1)
    assert none.raw_s[0] == 0.0 and none.exposed_s[0] == 0.0 and none.floor_s[0] == 0.0
