"""The step's all-reduce of the gradients of weights held whole on every TP rank (terms/tensor_parallel.py
duplicated_grad_allreduce; Megatron-Core finalize_model_grads -> _allreduce_non_tensor_model_parallel_grads):
MLA's down-projections and the MoE router, over the TP group, once per step, only with sequence parallelism.
Counts written out by hand from DeepSeek-V3's matrices (q_a_proj 7168 x 1536, kv_a_proj_with_mqa 7168 x 576, router
7168 x E) and timed with the closed-form collective model (bus bytes / BW)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import pytest

from engine.performance.model import step_terms
from engine.performance.terms.parameters import tp_duplicated_params
from engine.performance.terms.tensor_parallel import duplicated_grad_allreduce
from tests.engine.performance._build import BW, MOE_22B, LinearComm, build, dense_doc, moe_doc

H, LAYERS = 7168, 4
MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
MODEL = {"name": "MLA-test", "layers": LAYERS, "hidden": H, "heads": 128, "ffn_hidden": 18432, "gated_ffn": True,
         "vocab": 129280, "seq_len": 4096, "mla": MLA}
DOWN = 7168 * 1536 + 7168 * (512 + 64)  # per layer, on every TP rank
FP32 = 4.0  # Megatron reduces main_grad in fp32 with ZeRO < 3


def _doc(tp: int = 8, pp: int = 1, sp: bool = True) -> dict[str, Any]:
    return dense_doc(tp=tp, pp=pp, sp=sp, model=copy.deepcopy(MODEL), gpus=64)


def test_mla_down_projections_of_the_stage_are_duplicated() -> None:
    ctx, _lay, shape = build(_doc(pp=2))
    assert tp_duplicated_params(ctx, shape)[0] == pytest.approx(2 * DOWN, rel=1e-12)  # 2 of 4 layers per stage


@pytest.mark.parametrize("depth", [1, 2])
def test_the_modules_layers_add_their_duplicated_weights(depth: int) -> None:
    """Multi-token prediction: each module's layer is of the last layer's kind, with its own MLA down-projections
    (and, in an MoE model, its router), on the last rank beside the stage's layers."""
    doc = _doc(pp=2)
    doc["model"]["mtp_layers"] = depth
    ctx, _lay, shape = build(doc)
    assert tp_duplicated_params(ctx, shape)[0] == pytest.approx((2 + depth) * DOWN, rel=1e-12)
    moe = moe_doc(tp=2, ep=8)
    moe["model"]["mtp_layers"] = depth
    ctx, _lay, shape = build(moe)
    e, layers, dense_layers, h = 16, MOE_22B["layers"], 4, MOE_22B["hidden"]
    assert tp_duplicated_params(ctx, shape)[0] == pytest.approx((layers - dense_layers + depth) * h * e, rel=1e-12)


def test_router_is_duplicated_on_moe_layers_only() -> None:
    ctx, _lay, shape = build(moe_doc(tp=2, ep=8))
    e, layers, dense_layers, h = 16, MOE_22B["layers"], 4, MOE_22B["hidden"]
    assert tp_duplicated_params(ctx, shape)[0] == pytest.approx((layers - dense_layers) * h * e, rel=1e-12)


def test_one_allreduce_of_the_duplicated_fp32_gradients_over_tp() -> None:
    ctx, lay, shape = build(_doc(tp=8))
    comm = LinearComm()
    t = duplicated_grad_allreduce(lay, comm, tp_duplicated_params(ctx, shape), np.asarray(FP32))
    assert t[0] == pytest.approx(2.0 * LAYERS * DOWN * FP32 / BW, rel=1e-12)  # all-reduce: the buffer twice
    assert comm.calls == [("tp", comm.calls[0][1], LAYERS * DOWN * FP32)]


@pytest.mark.parametrize(("tp", "sp"), [(8, False), (1, False)])
def test_nothing_without_sequence_parallelism(tp: int, sp: bool) -> None:
    ctx, lay, shape = build(_doc(tp=tp, sp=sp))
    t = duplicated_grad_allreduce(lay, LinearComm(), tp_duplicated_params(ctx, shape), np.asarray(FP32))
    assert t[0] == 0.0


def test_the_step_pays_it_exposed_in_tp_comm() -> None:
    ctx, lay, _shape = build(_doc(tp=8))
    terms = step_terms(ctx, lay)
    st = terms.step
    assert st.tp_grads_s[0] > 0.0
    mb = st.microbatch
    m = terms.shape.microbatch_count
    assert st.breakdown_s.tp_comm[0] == pytest.approx(m * mb.tp_s[0] + st.tp_grads_s[0], rel=1e-12)
    total = sum(float(getattr(st.breakdown_s, f.name)[0]) for f in dataclasses.fields(st.breakdown_s))
    assert total == pytest.approx(st.step_s[0], rel=1e-12)
    # a standard-attention dense model has nothing duplicated
    c2, l2, _ = build(dense_doc(tp=8))
    assert step_terms(c2, l2).step.tp_grads_s[0] == 0.0
