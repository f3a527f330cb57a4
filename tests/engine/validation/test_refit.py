"""Refit hooks (engine/validation/refit.py): the solver finds the root of a closed-form residual; a GEMM
efficiency refit without a source makes the remaining calibration rows unbiased and puts the constant back."""

from __future__ import annotations

import math

import pytest

from engine.performance import hardware as hw
from engine.validation import refit
from engine.validation.runs import RUN_SETS, load_runs, source_key

LLAMA3 = "arXiv 2407.21783"
FOUNDRY = "mosaicml/llm-foundry scripts/train/benchmarking/README.md"
NEMO = "NVIDIA NeMo Framework 24.07 performance summary"


def _all_runs() -> list[dict]:
    return [r for s in RUN_SETS for r in load_runs(s.path)]


def _without(source: str) -> list[dict]:
    return [r for r in _all_runs() if source_key(r.get("source", "")) != source]


@pytest.mark.parametrize("target, elasticity", [(0.61, 1.0), (0.37, 0.6), (0.8, 0.3)])
def test_solve_finds_the_root_of_a_power_law_residual(target: float, elasticity: float) -> None:
    """Throughput proportional to value**elasticity: residual log(measured/predicted) = elasticity *
    log(target / value), zero at ``target`` (an independent closed form)."""
    state = {"x": 0.0}

    def residual() -> float:
        return elasticity * math.log(target / state["x"])

    found = refit.solve(lambda v: state.__setitem__("x", v), 0.5, residual, (0.2, 0.95))
    assert found == pytest.approx(target, rel=refit.TOLERANCE / elasticity * 2)
    assert state["x"] == found


def test_solve_stops_at_its_bound() -> None:
    state = {"x": 0.0}
    found = refit.solve(lambda v: state.__setitem__("x", v), 0.5, lambda: math.log(2.0 / state["x"]), (0.2, 0.95))
    assert found == 0.95


def test_hopper_bf16_refit_without_llama3_unbiases_the_rows_left_and_restores_the_constant() -> None:
    hook = refit.gemm_eff_refit("hopper", "gemm_eff_bf16", "bf16", (LLAMA3, FOUNDRY), followers=("blackwell",))
    before = hw.FAMILY_CONSTANTS["hopper"]["gemm_eff_bf16"], hw.FAMILY_CONSTANTS["blackwell"]["gemm_eff_bf16"]
    runs = _without(LLAMA3)
    rows = refit.calibration_rows(runs, (LLAMA3, FOUNDRY), family="hopper", precision="bf16")
    assert rows and all(source_key(r["source"]) == source_key(FOUNDRY) for r in rows)
    assert abs(refit.mean_log_residual(rows)) > 0.05  # the hand-set value leaves these rows biased
    with hook(runs):
        value = hw.FAMILY_CONSTANTS["hopper"]["gemm_eff_bf16"]
        assert value != before[0]
        assert hw.FAMILY_CONSTANTS["blackwell"]["gemm_eff_bf16"] == value  # Blackwell carries Hopper's
        assert abs(refit.mean_log_residual(rows)) <= refit.TOLERANCE * 1.5
    assert (hw.FAMILY_CONSTANTS["hopper"]["gemm_eff_bf16"],
            hw.FAMILY_CONSTANTS["blackwell"]["gemm_eff_bf16"]) == before


def test_a_refit_with_all_its_sources_keeps_the_value() -> None:
    hook = refit.gemm_eff_refit("ampere", "gemm_eff_bf16", "bf16", ("arXiv 2104.04473", "arXiv 2205.05198"))
    before = hw.FAMILY_CONSTANTS["ampere"]["gemm_eff_bf16"]
    with hook(_without(LLAMA3)):
        assert hw.FAMILY_CONSTANTS["ampere"]["gemm_eff_bf16"] == before


def test_hopper_fp8_without_its_only_source_follows_bf16_by_the_component_ratio() -> None:
    assert pytest.approx((1402.6 / 1979.0) / (794.5 / 989.0)) == refit.H100_FP8_OVER_BF16
    hook = refit.gemm_eff_refit("hopper", "gemm_eff_fp8", "fp8", (NEMO,), followers=("blackwell",))
    with hook(_without(NEMO)):
        assert hw.FAMILY_CONSTANTS["hopper"]["gemm_eff_fp8"] == pytest.approx(
            hw.FAMILY_CONSTANTS["hopper"]["gemm_eff_bf16"] * 0.8826, rel=1e-3)
    assert hw.FAMILY_CONSTANTS["hopper"]["gemm_eff_fp8"] == 0.50
