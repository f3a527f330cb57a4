"""Framework profiles (frameworks.py): keyword-only records keyed on the scenario's framework names, resolved per
layout with booleans as bools."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.performance.frameworks import PROFILES, FrameworkProfile, layout_profiles, moe_dispatcher
from engine.schema.enums import Framework


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
    assert prof.tp_overlap.tolist() == [0.3, 0.3, 0.0]
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
