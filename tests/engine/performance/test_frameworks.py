"""Framework profiles (frameworks.py): keyword-only records keyed on the scenario's framework names, resolved per
layout with booleans as bools."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import candidate_layouts, predict
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.tuning import collective_time
from engine.performance.frameworks import (
    PROFILES,
    RELEASES,
    ZERO3_BUCKETED_ASYNC,
    ZERO3_GATHER_MODES,
    ZERO3_PER_TENSOR_SYNC,
    FrameworkProfile,
    layout_profiles,
    moe_dispatcher,
    nccl_algorithms,
    profile_at,
)
from engine.schema.enums import Framework
from tests.engine._scenarios import LLAMA_7B
from tests.engine.performance._build import build, dense_doc, moe_doc


def test_every_framework_name_has_a_profile_and_nothing_else() -> None:
    assert list(PROFILES) == list(Framework.values())
    assert all(p.name == name for name, p in PROFILES.items())


def test_profiles_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        FrameworkProfile("x", 0.3, True, True, 40e6, False, False, 1.0, True)  # type: ignore[misc]
    assert dataclasses.fields(FrameworkProfile)[0].kw_only


def test_auto_runs_megatron_with_tp_or_pp_and_fsdp_otherwise() -> None:
    tp, pp = np.array([8.0, 1.0, 1.0]), np.array([1.0, 4.0, 1.0])
    prof = layout_profiles(None, tp, pp)
    assert prof.tp_overlap.tolist() == [0.0, 0.0, 0.0]  # Megatron's overlap is its asynchronous backward (below)
    assert prof.tp_backward_overlap.tolist() == [True, True, False]
    assert prof.bucket_params.tolist() == [40e6, 40e6, 25e6]
    assert prof.zero2_per_microbatch.dtype == np.bool_ and prof.zero2_per_microbatch.tolist() == [False, False, True]
    assert prof.ep_overlap.all() and prof.zero2_shards_grads.all()  # auto's own choices


def test_a_named_framework_applies_everywhere() -> None:
    prof = layout_profiles("deepspeed", np.array([8.0, 1.0]), np.array([1.0, 1.0]))
    assert not prof.grad_overlap.any() and prof.bucket_params.tolist() == [5e8, 5e8]
    assert not prof.ep_overlap.any()


def test_dispatcher_default_is_the_named_frameworks() -> None:
    assert moe_dispatcher("megatron-core", None) == "allgather"
    assert moe_dispatcher("nemo", None) == "alltoall" and moe_dispatcher(None, None) == "alltoall"
    assert moe_dispatcher("megatron-core", "alltoall") == "alltoall"


# ---- software as it ran (issue #22): dated records per framework, selected by training.framework_release


def test_every_framework_is_a_list_of_dated_records_oldest_first() -> None:
    assert list(RELEASES) == list(Framework.values())
    for name, dated in RELEASES.items():
        months = [p.since for p in dated]
        assert months == sorted(months) and len(set(months)) == len(months), name
        assert all(p.name == name for p in dated) and PROFILES[name] == dated[-1]
        assert all(p.zero3_gather in ZERO3_GATHER_MODES for p in dated)


def test_the_release_selects_the_record_in_force_then() -> None:
    """DeepSpeed: ZeRO-3 from #834 (2021-03), per-tensor synchronous gathers until PR #1453 (2022-01); Megatron-LM:
    --overlap-grad-reduce from 2d5220a424 (2023-09), --overlap-param-gather from f048bf8c08 (2023-11)."""
    assert profile_at("deepspeed", "2020-06").max_zero == 2
    assert profile_at("deepspeed", "2021-12").zero3_gather == ZERO3_PER_TENSOR_SYNC
    assert profile_at("deepspeed", "2022-01").zero3_gather == ZERO3_BUCKETED_ASYNC
    assert profile_at("deepspeed", None) == PROFILES["deepspeed"]
    assert profile_at("deepspeed", "2019-05") == dataclasses.replace(RELEASES["deepspeed"][0],
                                                                      nccl_algorithms=frozenset())  # earliest
    mc = [profile_at("megatron-core", m) for m in ("2023-08", "2023-09", "2023-11")]
    assert [(p.grad_overlap, p.param_overlap) for p in mc] == [(False, False), (True, False), (True, True)]
    assert not profile_at("megatron-core", "2020-12").interleaved_pipeline
    assert profile_at("megatron-core", "2021-02").interleaved_pipeline
    assert not any(p.interleaved_pipeline for p in RELEASES["deepspeed"])


def test_nccl_algorithms_follow_nccl_releases() -> None:
    """NVLS from NCCL 2.17.1-1 (2023-03-01), PAT from 2.23.4-1 (2024-09-16); none named: all."""
    assert nccl_algorithms("2023-02") == frozenset()
    assert nccl_algorithms("2023-03") == {"nvls"}
    assert nccl_algorithms("2024-08") == {"nvls"} and nccl_algorithms("2024-09") == {"nvls", "pat"}
    assert nccl_algorithms(None) == {"nvls", "pat"}


def test_the_nccl_of_the_release_reaches_the_collective_choice() -> None:
    """Context.net: an NCCL older than PAT never picks PAT; older than NVLS runs the NVLink ring for all-reduce."""
    ctx, _, _ = build(dense_doc(tp=1, gpus=64, zero=3, framework="fsdp", framework_release="2024-01"))
    assert ctx.net.unreleased_algorithms == {"pat"} and ctx.net.nvls
    ctx, _, _ = build(dense_doc(tp=1, gpus=64, zero=3, framework="fsdp", framework_release="2022-06"))
    assert ctx.net.unreleased_algorithms == {"pat", "nvls"} and not ctx.net.nvls
    ctx, _, _ = build(dense_doc(tp=1, gpus=64, zero=3, framework="fsdp"))
    assert ctx.net.unreleased_algorithms == frozenset() and ctx.net.nvls
    # one rank per node over 8 nodes (stride 8): PAT's case; without it the time can only grow
    net_now = ctx.net
    net_old = dataclasses.replace(net_now, unreleased_algorithms=frozenset({"pat"}))
    size, n, stride = np.array([1.0e5]), np.array([8.0]), np.array([8.0])
    assert (collective_time(net_old, CollectiveKind.ALL_GATHER, size, n, stride)[0]
            >= collective_time(net_now, CollectiveKind.ALL_GATHER, size, n, stride)[0])


def test_a_layout_the_framework_cannot_run_is_refused_naming_the_field() -> None:
    with pytest.raises(ScenarioError) as err:
        predict(dense_doc(tp=4, pp=2, vpp=2, gpus=64, framework="deepspeed"))
    assert err.value.field == "parallelism.vpp" and "interleaved" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        predict(dense_doc(tp=1, gpus=64, zero=3, framework="megatron-core", framework_release="2024-06"))
    assert err.value.field == "training.zero"
    predict(dense_doc(tp=1, gpus=64, zero=3, framework="megatron-core", framework_release="2024-11"))  # runs


def test_auto_searches_leave_out_what_the_framework_cannot_run() -> None:
    doc = dense_doc(tp=4, pp=4, gpus=64, framework="deepspeed", framework_release="2021-06")
    doc["parallelism"]["vpp"] = "auto"
    doc["training"]["zero"] = "auto"
    lay = candidate_layouts(parse_scenario(doc))
    # DeepSpeed's pipeline engine: 1F1B only, ZeRO-0/1 only beside pipeline stages
    assert len(lay) > 0 and set(lay.vpp.tolist()) == {1.0} and max(lay.zero.tolist()) == 1.0
    no_pipeline = parse_scenario(dict(doc, parallelism=dict(doc["parallelism"], pp=1)))
    assert 3.0 in candidate_layouts(no_pipeline).zero.tolist()
    doc["training"]["framework"] = "megatron-core"
    lay = candidate_layouts(parse_scenario(doc))
    assert set(lay.vpp.tolist()) > {1.0} and max(lay.zero.tolist()) == 0.0  # no distributed optimizer until 2022-06
    doc["training"]["framework_release"] = "2022-06"
    assert max(candidate_layouts(parse_scenario(doc)).zero.tolist()) == 2.0


def test_megatron_interleaves_two_stages_only_from_2024_05() -> None:
    """arguments.py asserted pp > 2 with virtual stages from 182841f7df (2021-03) until 3ee489d9ea (2024-05-31,
    "Enable virtual pipelining and P2P communication overlap at PP=2")."""
    assert [profile_at("megatron-core", m).interleaved_min_pp for m in ("2021-04", "2024-04", "2024-05")] == [3, 3, 2]
    assert profile_at("nemo", "2023-06").interleaved_min_pp == 3 and PROFILES["megatron-core"].interleaved_min_pp == 2
    with pytest.raises(ScenarioError) as err:
        candidate_layouts(parse_scenario(dense_doc(tp=4, pp=2, vpp=2, framework="megatron-core",
                                                   framework_release="2023-01")))
    assert err.value.field == "parallelism.vpp" and "pp >= 3" in str(err.value)
    lay = candidate_layouts(parse_scenario(dense_doc(tp=4, pp=2, vpp=2, framework="megatron-core",
                                                     framework_release="2024-06")))
    assert set(lay.vpp.tolist()) == {2.0}


def test_megatron_splits_the_pipeline_evenly_before_2024_09_and_deepspeed_never_must() -> None:
    """Megatron-LM's uneven pipeline split arrived with fa8bb5921b (2024-09-05, --decoder-last-pipeline-num-layers);
    DeepSpeed's PipelineModule had partition_method from its first commit (65c2f974d, 2020-09). The rule reaches the
    step: with a 128K vocabulary (an output layer worth about two layers) the same layout on Megatron-LM of 2024-08 is
    slower than on 2024-10, whose split gives the last rank fewer layers."""
    assert [profile_at("megatron-core", m).uneven_pipeline_split for m in ("2023-01", "2024-08", "2024-09")] == [
        False, False, True]
    assert profile_at("nemo", "2024-07").uneven_pipeline_split is False and PROFILES["nemo"].uneven_pipeline_split
    assert all(p.uneven_pipeline_split for p in RELEASES["deepspeed"])
    doc = dense_doc(tp=8, pp=4, gpus=64, gb=64, framework="megatron-core", model=dict(LLAMA_7B, vocab=128256))
    old = predict(dict(doc, training=dict(doc["training"], framework_release="2024-08")))
    new = predict(dict(doc, training=dict(doc["training"], framework_release="2024-10")))
    assert old.step_time_s is not None and new.step_time_s is not None
    assert old.step_time_s > new.step_time_s


def test_interleaving_needs_microbatches_per_step_a_multiple_of_pp() -> None:
    """Megatron's interleaved schedule (b7067cbd6f, 2021-02, to now: microbatch_group_size_per_vp_stage defaults to
    pp) needs global_batch / (dp x micro_batch) divisible by pp. tp 4, pp 4 on 64 GPUs: dp 4; global batch 24 at
    micro-batch 1 gives 6 micro-batches (refused for vpp 2), 32 gives 8 (runs). The framework auto runs layouts
    with pipeline stages on Megatron-Core, so it takes the rule too."""
    for framework in ("megatron-core", "nemo", "auto"):
        with pytest.raises(ScenarioError) as err:
            candidate_layouts(parse_scenario(dense_doc(tp=4, pp=4, vpp=2, gb=24, framework=framework)))
        assert err.value.field == "parallelism.vpp" and "divisible by pp" in str(err.value)
        assert len(candidate_layouts(parse_scenario(dense_doc(tp=4, pp=4, vpp=2, gb=32, framework=framework)))) == 1
    doc = dense_doc(tp=4, pp=4, gb=48, framework="megatron-core")
    doc["parallelism"]["vpp"] = "auto"
    doc["training"]["micro_batch"] = "auto"
    lay = candidate_layouts(parse_scenario(doc))
    microbatches = 48 / (lay.dp * lay.mb)
    interleaved = lay.vpp > 1
    assert interleaved.any() and (microbatches[interleaved] % lay.pp[interleaved] == 0).all()
    # not interleaved: any count runs (micro-batch 4 gives 3 micro-batches per step on 4 stages)
    assert ((microbatches % lay.pp != 0) & ~interleaved).any()


def test_deepspeeds_pipeline_engine_runs_zero_0_and_1_only() -> None:
    """deepspeed/runtime/pipe/engine.py (fbece50b2, 2021-04-19, PR #980, to 2025): "ZeRO-2 and ZeRO-3 are incompatible
    with pipeline parallelism". Megatron-Core's distributed optimizer runs beside pipeline stages."""
    assert profile_at("deepspeed", "2020-06").max_zero_with_pp == 1 and PROFILES["deepspeed"].max_zero_with_pp == 1
    for zero in (2, 3):
        with pytest.raises(ScenarioError) as err:
            candidate_layouts(parse_scenario(dense_doc(tp=4, pp=4, zero=zero, framework="deepspeed")))
        assert err.value.field == "training.zero" and "incompatible with pipeline" in str(err.value)
        assert len(candidate_layouts(parse_scenario(dense_doc(tp=4, pp=1, zero=zero, framework="deepspeed")))) == 1
    assert len(candidate_layouts(parse_scenario(dense_doc(tp=4, pp=4, zero=1, framework="deepspeed")))) == 1
    assert len(candidate_layouts(parse_scenario(dense_doc(tp=4, pp=4, zero=2, framework="megatron-core")))) == 1


def test_megatron_ran_zero3_without_pipeline_or_expert_parallelism_from_2024_11_to_2025_02() -> None:
    """Megatron-LM e1993fa6f7 (2024-11-13), its first ZeRO-3 (--use-torch-fsdp2), asserts pipeline_model_parallel_size
    == 1 and expert_model_parallel_size == 1; d165a8548b (2025-02-26, Megatron-FSDP) asserts neither. NeMo follows
    Megatron-Core's records."""
    for framework in ("megatron-core", "nemo"):
        with pytest.raises(ScenarioError) as err:
            candidate_layouts(parse_scenario(dense_doc(tp=4, pp=4, zero=3, framework=framework,
                                                       framework_release="2024-12")))
        assert err.value.field == "training.zero" and "--use-torch-fsdp2" in str(err.value) \
            and "pipeline parallelism" in str(err.value) and "DeepSpeed" not in str(err.value)
        moe = moe_doc(ep=8, framework=framework)
        moe["training"] |= {"zero": 3, "framework_release": "2025-01"}
        with pytest.raises(ScenarioError) as err:
            candidate_layouts(parse_scenario(moe))
        assert err.value.field == "training.zero" and "expert parallelism" in str(err.value)
        moe["training"]["framework_release"] = "2025-02"
        assert len(candidate_layouts(parse_scenario(moe))) == 1
        for release, pp in (("2024-12", 1), ("2025-02", 4)):
            assert len(candidate_layouts(parse_scenario(dense_doc(tp=4, pp=pp, zero=3, framework=framework,
                                                                  framework_release=release)))) == 1
    doc = dense_doc(tp=4, pp=4, framework="megatron-core", framework_release="2024-12")
    doc["training"]["zero"] = "auto"
    assert max(candidate_layouts(parse_scenario(doc)).zero.tolist()) == 2.0  # the search leaves ZeRO-3 out
    doc["parallelism"]["pp"] = 1
    assert max(candidate_layouts(parse_scenario(doc)).zero.tolist()) == 3.0


def test_auto_takes_megatron_cores_interleaved_rules_at_the_release() -> None:
    """The framework auto runs layouts with pipeline stages on Megatron-Core at training.framework_release (as
    frameworks.layout_profiles does), so its interleaved schedule's rules are that release's: none before 2021-02
    (dd88906264), pp > 2 until 2024-05."""
    with pytest.raises(ScenarioError) as err:
        candidate_layouts(parse_scenario(dense_doc(tp=4, pp=2, vpp=2, framework="auto", framework_release="2023-01")))
    assert err.value.field == "parallelism.vpp" and "pp >= 3" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        candidate_layouts(parse_scenario(dense_doc(tp=4, pp=4, vpp=2, framework="auto", framework_release="2020-06")))
    assert err.value.field == "parallelism.vpp" and "no interleaved" in str(err.value)
    doc = dense_doc(tp=4, pp=4, framework="auto", framework_release="2020-06")
    doc["parallelism"]["vpp"] = "auto"
    assert set(candidate_layouts(parse_scenario(doc)).vpp.tolist()) == {1.0}
    doc["training"]["framework_release"] = "2021-06"
    assert set(candidate_layouts(parse_scenario(doc)).vpp.tolist()) > {1.0}
    # auto puts no limit on ZeRO beside pipeline stages (the engine's generic stack)
    assert len(candidate_layouts(parse_scenario(dense_doc(tp=4, pp=4, zero=3, framework="auto",
                                                          framework_release="2024-12")))) == 1


def test_deepspeed_fsdp_and_megatron_core_differ_for_zero3_where_their_sources_do() -> None:
    """7B, ZeRO-3, 64 GPUs: DeepSpeed's 2021 per-tensor synchronous gathers are slowest, its current 5e7-parameter
    buckets slower than FSDP's one gather per layer; Megatron-Core (FSDP2 / Megatron-FSDP) gathers as FSDP does. One
    attention kernel for all (Megatron-Core's own is Transformer Engine's cuDNN class), so that only ZeRO-3 differs."""
    def step(framework: str, release: str | None = None) -> float:
        training = {"framework": framework, "attention": "flash"} | ({"framework_release": release} if release else {})
        return float(predict(dense_doc(tp=1, gpus=64, zero=3, **training)).step_time_s)

    ds21, ds24, fsdp, mcore = step("deepspeed", "2021-06"), step("deepspeed", "2024-06"), step("fsdp"), \
        step("megatron-core")
    assert ds21 > ds24 > fsdp
    assert mcore == pytest.approx(fsdp, rel=1e-12)


def test_the_release_is_a_month_from_2019_to_now() -> None:
    for bad in ("2018-12", "2999-01", "2021-13", "21-01", 202101):
        with pytest.raises(ScenarioError) as err:
            parse_scenario(dense_doc(framework="fsdp", framework_release=bad))
        assert err.value.field == "training.framework_release"
    assert parse_scenario(dense_doc(framework="fsdp", framework_release="2023-07")).training.framework_release \
        == "2023-07"


def test_megatron_hides_tp_collectives_under_the_backward_from_september_2021() -> None:
    """Megatron-LM's ColumnParallelLinearWithAsyncAllreduce (merge 6e1bde1e0f, 2021-09-02) is the first release whose
    column-parallel backward runs a TP collective asynchronously; NeMo's layers overlap through Transformer Engine's
    userbuffers instead (its 0.6 share), not through this path."""
    assert not profile_at(Framework.MEGATRON_CORE, "2021-04").tp_backward_overlap
    assert profile_at(Framework.MEGATRON_CORE, "2021-09").tp_backward_overlap
    assert profile_at(Framework.MEGATRON_CORE, None).tp_backward_overlap
    assert all(p.tp_overlap == 0.0 for p in RELEASES[Framework.MEGATRON_CORE])
    assert not any(p.tp_backward_overlap for p in RELEASES[Framework.NEMO])
    assert all(p.tp_overlap == 0.6 for p in RELEASES[Framework.NEMO])


def test_megatron_shards_no_optimizer_state_before_its_distributed_optimizer() -> None:
    """--use-distributed-optimizer arrived with merge d07d29df14 (2022-06-08); before it Megatron-LM all-reduced
    gradients and replicated optimizer states, so ZeRO-1 is refused naming training.zero and the search keeps ZeRO-0."""
    assert [profile_at("megatron-core", m).max_zero for m in ("2021-04", "2022-05", "2022-06")] == [0, 0, 2]
    with pytest.raises(ScenarioError) as err:
        predict(dense_doc(tp=8, gpus=64, zero=1, framework="megatron-core", framework_release="2022-05"))
    assert err.value.field == "training.zero" and "distributed optimizer from 2022-06" in str(err.value)
    assert predict(dense_doc(tp=8, gpus=64, zero=1, framework="megatron-core", framework_release="2022-06")).fits
    searched = dense_doc(tp=8, gpus=64, framework="megatron-core", framework_release="2021-04")
    searched["training"]["zero"] = "auto"
    assert predict(searched).parallelism["zero"] == 0
