"""The embedding and the loss each taking a layer's place in the pipeline split (parallelism.embedding_loss_in_split;
Megatron-Core's account_for_embedding_in_pipeline_split + account_for_loss_in_pipeline_split, transformer_block.py
get_num_layers_to_build; Llama 3, arXiv 2407.21783 s.3.3.2). Llama 3 405B: 126 layers + 2 places over 16 stages
is 8 places per stage, one layer per chunk at vpp 8, the first chunk of the first stage only the embedding."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import candidate_layouts
from engine.performance.terms.memory import in_flight_layer_microbatches, last_rank_layer_microbatches
from engine.schema.types import scenario_to_dict
from tests.engine._scenarios import LLAMA_7B, scenario
from tests.engine.performance._build import build

LAYERS = 126


def _doc(pp: int = 16, vpp: Any = 8, split: bool | None = True, gb: int = 128, gpus: int = 1024) -> dict[str, Any]:
    # gb 128 at d = 8: 16 micro-batches per step, a multiple of pp 16 as Megatron's interleaved schedule needs
    par: dict[str, Any] = {"tp": 8, "pp": pp, "cp": 1, "ep": 1, "vpp": vpp, "sequence_parallel": True}
    if split is not None:
        par["embedding_loss_in_split"] = split
    return scenario(model=dict(LLAMA_7B, layers=LAYERS),
                    training={"global_batch": gb, "micro_batch": 1, "recompute": "none", "zero": 1},
                    parallelism=par, cluster={"gpus": gpus})


def test_pp_times_vpp_may_reach_the_layers_plus_two() -> None:
    assert parse_scenario(_doc()).parallelism.embedding_loss_in_split is True  # 16 x 8 = 128 = 126 + 2
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(_doc(split=None))
    assert exc.value.field == "parallelism.vpp" and "126" in str(exc.value)
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(_doc(pp=16, vpp=9))  # 144 > 128
    assert exc.value.field == "parallelism.vpp" and "128" in str(exc.value)


def test_written_only_when_set() -> None:
    assert scenario_to_dict(parse_scenario(_doc()))["parallelism"]["embedding_loss_in_split"] is True
    assert "embedding_loss_in_split" not in scenario_to_dict(parse_scenario(_doc(vpp=4, split=None)))["parallelism"]


@pytest.mark.parametrize(("pp", "vpp", "split", "layers"), [
    (16, 8, True, 8),    # a middle stage: 8 chunks of ceil(128 / 128) = 1 layer
    (16, 4, True, 8),    # 4 chunks of ceil(128 / 64) = 2
    (16, 4, None, 8),    # without: 4 chunks of ceil(126 / 64) = 2
    (2, 1, True, 63),    # both stages give one of their 64 places to the embedding or the loss
    (2, 1, None, 63),    # ceil(126 / 2)
    (1, 1, True, 126),   # no pipeline: nothing to split
])
def test_layers_of_the_bottleneck_stage(pp: int, vpp: int, split: bool | None, layers: int) -> None:
    _ctx, _lay, shape = build(_doc(pp=pp, vpp=vpp, split=split, gpus=8 * pp * 8))
    assert shape.stage_layers[0] == layers


def test_first_stage_keeps_no_layer_activations_of_its_first_chunk() -> None:
    """Megatron's interleaved warm-up keeps 2p - 1 micro-batches of chunk 0 and p of every other chunk on rank 0:
    chunk 0 holding only the embedding, 7 chunks x 1 layer x 16 micro-batches = 112 layer-micro-batches (without the
    split at vpp 4: chunk 0 of floor(126 / 64) = 1 layer x 31 + 3 chunks x 2 layers x 16 = 127)."""
    ctx, lay, shape = build(_doc(gb=128))  # d = 8: 16 micro-batches, a full warm-up
    assert in_flight_layer_microbatches(ctx, lay, shape)[0] == pytest.approx(7 * 1 * 16)
    ctx4, lay4, shape4 = build(_doc(vpp=4, split=None, gb=128))
    assert in_flight_layer_microbatches(ctx4, lay4, shape4)[0] == pytest.approx(1 * 31 + 3 * 2 * 16)


def test_last_rank_holds_its_warm_up_less_the_loss_place() -> None:
    """Megatron's interleaved warm-up at the last rank (p - 1): (p - rank - 1) * 2 + (v - 1) * p = 7 * 16 = 112
    chunk-forwards, plus one in steady state: 16 micro-batches of each of chunks 0-6 and one of chunk 7. With the
    split (128 places, one per chunk) chunk 7 holds the output layer and loss only: 7 * 16 * 1 + 1 * 0 = 112; without
    it at vpp 4 (chunks of ceil(126 / 64) = 2 layers): 3 * 16 * 2 + 1 * 2 = 98. Not interleaved, one micro-batch of
    the rank's layers: 8 at pp 16 (126 / 16 rounded up), 7 with the split (128 / 16 = 8 places, one the loss's)."""
    for doc, expected in ((_doc(gb=128), 7 * 16 * 1), (_doc(vpp=4, split=None, gb=128), 3 * 16 * 2 + 2),
                          (_doc(vpp=1, split=None, gb=128), 8), (_doc(vpp=1, gb=128), 7)):
        ctx, lay, shape = build(doc)
        assert last_rank_layer_microbatches(ctx, lay, shape)[0] == pytest.approx(expected)


def test_the_search_tries_one_layer_per_chunk_only_with_the_split() -> None:
    with_split = candidate_layouts(parse_scenario(_doc(vpp="auto")))
    without = candidate_layouts(parse_scenario(_doc(vpp="auto", split=None)))
    assert 8 in set(np.asarray(with_split.vpp).tolist())
    assert 8 not in set(np.asarray(without.vpp).tolist())


@pytest.mark.parametrize(("pp", "vpp", "why"), [(12, 1, "12 whole stages"), (16, 3, "3 whole chunks")])
def test_places_must_split_into_whole_stages_and_chunks(pp: int, vpp: int, why: str) -> None:
    """Megatron-Core asserts (L + 2) % p == 0 and ((L + 2) / p) % v == 0 (transformer_block.py): 128 places do not
    go into 12 stages, nor 8 per stage into 3 chunks."""
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(_doc(pp=pp, vpp=vpp, gpus=8 * pp * 8))
    assert exc.value.field == "parallelism.embedding_loss_in_split" and why in str(exc.value)


def test_the_search_keeps_only_whole_splits() -> None:
    """96 layers + 2 = 98 places: pp 2 and 7 split them (49 and 14 per stage), pp 4 and 8 do not; without the flag
    every pp that divides the GPUs is tried."""
    doc = _doc(pp="auto", vpp="auto", gpus=1024)
    doc["model"]["layers"] = 96
    lay = candidate_layouts(parse_scenario(doc))
    pps = set(np.asarray(lay.pp).tolist())
    assert 2 in pps and not pps & {4, 8, 16}
    for pp, vpp in zip(np.asarray(lay.pp).tolist(), np.asarray(lay.vpp).tolist(), strict=True):
        assert pp == 1 or (98 % pp == 0 and (98 // pp) % vpp == 0)
