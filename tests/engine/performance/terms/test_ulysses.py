"""All-to-all context parallelism (training.cp_comm_type a2a, DeepSpeed-Ulysses; terms/context_parallel.py
ulysses_bytes, terms/attention.kernel_key_blocks) against its counts written out by hand: per layer and
micro-batch two all-to-alls (forward: Q, K, V before the kernel and the output after; backward: dO, then dQ, dK,
dV) of each rank's b s / c tokens, all exposed; the kernel attends over the whole sequence in one block with 1/c
of the heads; layouts whose TP-rank heads do not split over the CP ranks are not run."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import candidate_layouts
from engine.performance.terms.attention import attention_core
from engine.performance.terms.context_parallel import context_parallel_comm
from engine.schema.types import scenario_to_dict
from tests.engine._scenarios import LLAMA_7B
from tests.engine.performance._build import BW, LinearComm, build, dense_doc

S, H, T = 4096.0, 4096.0, 8.0  # Llama-2-7B: 32 heads of 128 (32 KV heads), s 4096, b 1, TP 8


def _doc(cp: int = 2, kind: str = "a2a", model: dict | None = None, **kw):
    doc = dense_doc(tp=8, cp=cp, gpus=64, gb=16, model=model, **kw)
    doc["training"]["cp_comm_type"] = kind
    return doc


@pytest.mark.parametrize("cp", [2, 4])
def test_two_exposed_alltoalls_of_q_k_v_and_the_output(cp: int) -> None:
    """Per rank b s / c tokens of Q (h / t), K and V (h / t each) and the output (h / t), bf16: 2 x M x 4h/t x 2 B
    over the closed-form all-to-all (buffer / BW), exposed however long the attention."""
    ctx, lay, shape = build(_doc(cp=cp))
    assert ctx.cp_a2a
    m_tok = S / cp
    raw = 2.0 * m_tok * 4.0 * H / T * 2.0 / BW
    attn = dataclasses.replace(attention_core(ctx, lay, shape), forward_s=np.array([10 * raw]),
                               backward_s=np.array([10 * raw]))
    comm = context_parallel_comm(ctx, lay, shape, attn, LinearComm())
    assert comm.alltoall_bytes[0] == pytest.approx(m_tok * 4.0 * H / T * 2.0, rel=1e-12)
    assert comm.raw_s[0] == pytest.approx(raw, rel=1e-12)
    assert comm.exposed_s[0] == pytest.approx(raw, rel=1e-12)
    assert comm.floor_s[0] == pytest.approx(raw, rel=1e-12)


def test_no_context_parallelism_no_exchange() -> None:
    ctx, lay, shape = build(_doc(cp=1))
    comm = context_parallel_comm(ctx, lay, shape, attention_core(ctx, lay, shape), LinearComm())
    assert comm.raw_s[0] == 0.0 and comm.exposed_s[0] == 0.0


def test_the_kernel_attends_over_the_whole_sequence_in_one_block() -> None:
    """Ring CP 4 runs 4 kernel pairs on 1,024-key blocks; Ulysses one pair over all 4,096 keys (with a quarter of
    the heads: the same work), at the flash class's rate for 4K ranges (flat from 2K: 989 TF x 0.35)."""
    flops = 4.0 * (S / 4) * (S / 2) * H / T  # the rank's s / c queries, s/2 causal keys, h / t of the heads
    ring = attention_core(*build(_doc(cp=4, kind="p2p")))
    ulysses = attention_core(*build(_doc(cp=4)))
    assert ulysses.forward_s[0] == pytest.approx(flops / (989e12 * 0.35) + 2 * 3e-6, rel=1e-9)
    block_rate = (1024 / 1464) / (2048 / 2488)  # 1K-key blocks against the 2K reference
    assert ring.forward_s[0] == pytest.approx(flops / (989e12 * 0.35 * block_rate) + 8 * 3e-6, rel=1e-9)


def test_layouts_whose_heads_do_not_split_are_not_run_and_a_fixed_one_is_refused() -> None:
    """Llama 3 8B shape (32 query heads, 8 KV heads): at TP 8 each rank has one KV head, which cannot split over
    CP 2; at TP 4 two KV heads split over CP 2. The search keeps only layouts where both divide."""
    gqa = dict(copy.deepcopy(LLAMA_7B), kv_heads=8)
    with pytest.raises(ScenarioError) as err:
        parse_and_layouts(_doc(cp=2, model=gqa))
    assert err.value.field == "training.cp_comm_type"
    doc = _doc(cp=2, model=gqa)
    doc["parallelism"].update({"tp": "auto", "cp": "auto", "pp": "auto"})
    lay = parse_and_layouts(doc)
    q, kv = 32 / lay.tp, np.maximum(8 / lay.tp, 1)
    assert np.all((lay.cp == 1) | ((np.mod(q, lay.cp) == 0) & (np.mod(kv, lay.cp) == 0)))
    assert np.any(lay.cp > 1) and not np.any((lay.tp == 8) & (lay.cp > 1))
    p2p = dict(doc, training=dict(doc["training"], cp_comm_type="p2p"))
    assert np.any((parse_and_layouts(p2p).tp == 8) & (parse_and_layouts(p2p).cp > 1))


def parse_and_layouts(doc):
    return candidate_layouts(parse_scenario(doc))


def test_the_choice_is_read_and_written() -> None:
    s = parse_scenario(_doc())
    assert s.training.cp_comm_type == "a2a" and scenario_to_dict(s)["training"]["cp_comm_type"] == "a2a"
