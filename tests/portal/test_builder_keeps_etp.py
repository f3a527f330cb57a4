"""The builder's manual parallelism keeps what it has no input for: MoE parallel folding (parallelism.etp) and the
DP placement survive an edit of a MoE scenario, and etp is dropped when the model loses its experts."""

from __future__ import annotations

from portal.forms.builder_sections import parallelism_section

STORED = {"tp": 8, "pp": 2, "cp": 1, "ep": 8, "etp": 1, "dp_placement": "outer", "vpp": 1}


def test_manual_edit_of_a_moe_scenario_keeps_etp_and_placement() -> None:
    out = parallelism_section({"par_mode": "manual", "tp": 8, "pp": 4, "cp": 1, "ep": 8, "moe_experts": 64}, STORED)
    assert out["etp"] == 1
    assert out["dp_placement"] == "outer"
    assert out["pp"] == 4


def test_a_dense_model_loses_etp() -> None:
    out = parallelism_section({"par_mode": "manual", "tp": 8, "pp": 2, "cp": 1, "ep": 8}, STORED)
    assert "etp" not in out
    assert out["ep"] == 1


TRAINING = {"global_batch": 512, "tokens": 1e12, "precision": "fp8", "recompute": "full", "micro_batch": 1,
            "zero": 1, "framework_release": "2024-06", "shard_group": 8, "recompute_modules": ["layernorm"],
            "activation_cache": "fp8", "optimizer_moments": "bf16", "recompute_layers": 5}
FORM = {"global_batch": 512, "tokens_b": 1000, "precision": "fp8", "recompute": "full"}


def test_an_edit_keeps_every_training_setting_the_form_does_not_show() -> None:
    from portal.forms.builder_sections import training_section

    out = training_section(FORM, TRAINING)
    for key in ("framework_release", "shard_group", "recompute_modules", "activation_cache", "optimizer_moments",
                "recompute_layers", "micro_batch", "zero"):
        assert out[key] == TRAINING[key], key


def test_settings_a_form_change_makes_meaningless_go_with_it() -> None:
    from portal.forms.builder_sections import training_section

    out = training_section({**FORM, "recompute": "selective", "precision": "bf16"}, TRAINING)
    assert "recompute_layers" not in out  # needs full recomputation
    assert "activation_cache" not in out  # an fp8 cache needs a quantised precision
    assert out["optimizer_moments"] == "bf16" and out["recompute_modules"] == ["layernorm"]
