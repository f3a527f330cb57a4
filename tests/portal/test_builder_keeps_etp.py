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
