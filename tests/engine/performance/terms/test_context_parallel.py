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


def test_the_all_gather_form_exposes_the_whole_ring_however_long_the_attention() -> None:
    """training.cp_comm_type all-gather (Llama 3): K and V gathered before the kernel, dK and dV reduce-scattered
    after it: all three collectives in the critical path (3 x 4096 x 2 x 512 x 2 B / BW), not a tenth."""
    raw = 3.0 * 4096 * 2 * 512 * 2.0 / BW
    doc = dense_doc(tp=8, cp=4, gpus=64, gb=16)
    doc["training"]["cp_comm_type"] = "all-gather"
    ctx, lay, shape = build(doc)
    assert ctx.cp_allgather
    attn = dataclasses.replace(attention_core(ctx, lay, shape), forward_s=np.array([raw]), backward_s=np.array([raw]))
    gathered = context_parallel_comm(ctx, lay, shape, attn, LinearComm())
    assert gathered.exposed_s[0] == pytest.approx(raw, rel=1e-12) and gathered.floor_s[0] == pytest.approx(raw)
    assert _cp(raw, raw).exposed_s[0] == pytest.approx(0.1 * raw, rel=1e-12)  # the ring, same bytes


def test_cp_comm_type_is_read_refused_by_name_and_written_only_when_set() -> None:
    from engine.document.parse import parse_scenario
    from engine.errors import ScenarioError
    from engine.schema.types import scenario_to_dict

    doc = dense_doc(tp=8, cp=4, gpus=64, gb=16)
    assert "cp_comm_type" not in scenario_to_dict(parse_scenario(doc))["training"]
    doc["training"]["cp_comm_type"] = "all-gather"
    s = parse_scenario(doc)
    assert s.training.cp_comm_type == "all-gather" and scenario_to_dict(s)["training"]["cp_comm_type"] == "all-gather"
    doc["training"]["cp_comm_type"] = "ulysses"
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc)
    assert info.value.field == "training.cp_comm_type" and "all-gather" in str(info.value)
