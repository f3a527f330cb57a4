"""Which engine constants are derived from validation rows, and how leave-one-source-out refits them.

Issue #22: constants are set from component measurements (kernel benchmarks, nccl-tests, datasheets), never
fitted to end-to-end training rows; published runs only validate. Leave-one-source-out (LOSO, loso.py) needs
to know every constant that does use a row, so that it can set the constant again without the rows of the
source being predicted. That is this registry: one :class:`RowDerivedConstant` per such constant, with its
``refit`` hook (a context manager that sets the constant from the runs it is given for the duration of a
``with`` block, e.g. through a catalog override of a family constant, and puts it back after).

The entries below are constants whose stated source (their comment in engine/performance, or
docs/performance-model.md) is a set of end-to-end training rows rather than a component measurement. They
were set once, by hand, from those rows: "grounded on end-to-end rows", a defect still (each wants a component
measurement). Every one has a refit hook (refit.py): leave-one-source-out sets it again from the rows of the
other sources, so the LOSO error of a calibration source's rows is a validation error, not a calibration one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.validation.refit import (
    RefitHook,
    family_constant,
    gemm_eff_refit,
    noop_refit,
)


@dataclass(frozen=True)
class RowDerivedConstant:
    name: str  # the constant as the engine spells it
    where: str  # the module that defines it
    value: str  # its value today
    grounded_on: str  # the rows it was set from, as its stated source gives them
    sources: tuple[str, ...]  # runs.source_key of those rows (the publications LOSO would leave out)
    refit: RefitHook | None = None  # None: fixed by hand, LOSO cannot take its sources out
    current: Callable[[], float] | None = None  # reads the value in force (the report shows each refit)

    @property
    def has_refit(self) -> bool:
        return self.refit is not None


_FOUNDRY = "mosaicml/llm-foundry scripts/train/benchmarking/README.md"
_NEMO_2407 = "NVIDIA NeMo Framework 24.07 performance summary"

ROW_DERIVED_CONSTANTS: tuple[RowDerivedConstant, ...] = (
    RowDerivedConstant(
        name='FAMILY_CONSTANTS["ampere"]["gemm_eff_bf16"]',
        where="engine/performance/hardware.py",
        value="0.66",
        grounded_on="calibrated against the reference set's A100 rows with every other term in place: "
                    "5 Megatron SC21 rows (Table 1) + 4 Korthikanti et al. rows (Table 5)",
        sources=("arXiv 2104.04473", "arXiv 2205.05198"),
        refit=gemm_eff_refit("ampere", "gemm_eff_bf16", "bf16", ("arXiv 2104.04473", "arXiv 2205.05198")),
        current=family_constant("ampere", "gemm_eff_bf16"),
    ),
    RowDerivedConstant(
        name='FAMILY_CONSTANTS["hopper"]["gemm_eff_bf16"]',
        where="engine/performance/hardware.py",
        value="0.52",
        grounded_on="calibrated against the reference set's H100 bf16 rows: Llama 3 405B (Table 4) and "
                    "MPT-13B (LLM Foundry benchmark table)",
        sources=("arXiv 2407.21783", "mosaicml/llm-foundry scripts/train/benchmarking/README.md"),
        refit=gemm_eff_refit("hopper", "gemm_eff_bf16", "bf16", ("arXiv 2407.21783", _FOUNDRY),
                             followers=("blackwell",)),
        current=family_constant("hopper", "gemm_eff_bf16"),
    ),
    RowDerivedConstant(
        name='FAMILY_CONSTANTS["hopper"]["gemm_eff_fp8"]',
        where="engine/performance/hardware.py",
        value="0.50",
        grounded_on="calibrated with the two NeMo 24.07 fp8 rows of the reference set (GPT-3 175B on 128 "
                    "H100, Llama 3 70B on 64 H100)",
        sources=("NVIDIA NeMo Framework 24.07 performance summary",),
        refit=gemm_eff_refit("hopper", "gemm_eff_fp8", "fp8", (_NEMO_2407,), followers=("blackwell",)),
        current=family_constant("hopper", "gemm_eff_fp8"),
    ),
    RowDerivedConstant(
        name='FAMILY_CONSTANTS["blackwell"]["gemm_eff_bf16"], ["gemm_eff_fp8"]',
        where="engine/performance/hardware.py",
        value="0.52, 0.50 (Hopper's)",
        grounded_on="Hopper's row-calibrated values carried over; kept after checking the Blackwell rows "
                    "for a common-sign bias (a decision taken on rows, no value fitted)",
        sources=("arXiv 2407.21783", "mosaicml/llm-foundry scripts/train/benchmarking/README.md",
                 "NVIDIA NeMo Framework 24.07 performance summary"),
        refit=noop_refit,  # follows the Hopper refits above (their followers)
    ),
)


def refit_hooks(constants: Sequence[RowDerivedConstant] = ROW_DERIVED_CONSTANTS) -> list[RowDerivedConstant]:
    """The constants LOSO refits (those with a hook)."""
    return [c for c in constants if c.refit is not None]


def grounded_sources(constants: Sequence[RowDerivedConstant] = ROW_DERIVED_CONSTANTS) -> set[str]:
    """Sources whose rows set a constant that LOSO cannot refit (their LOSO error is in-sample)."""
    return {s for c in constants if c.refit is None for s in c.sources}
