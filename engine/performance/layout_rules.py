"""The layouts a training stack can run at its release: one table of rules, read from the stacks' source history.

Each :class:`LayoutRule` is a limit a framework profile (frameworks.FrameworkProfile, at training.framework_release)
puts on the candidate layouts, the layout columns it reads, and the scenario field a refusal names. The layout
search (api.candidate_layouts) builds its columns one at a time and hands the growing table to one
:class:`LayoutGate`, which applies every rule as soon as the columns it reads exist (so a rule on vpp alone prunes
before micro-batch sizes multiply the table): an "auto" setting's layouts that break a rule are left out; a setting
the scenario fixes or lists that no layout can run under a rule is refused naming its field, with the rule and its
fix. docs/performance-model.md s.3b lists the rules with the commits that date them.

Which profile: the named framework's record at the release. With the framework ``auto`` (resolved per layout,
frameworks.layout_profiles), layouts with pipeline stages run on Megatron-Core, so the interleaved-schedule rules
(which concern only pp > 1) are Megatron-Core's at the release; ``auto`` puts no limit on ZeRO stages (the engine's
generic stack).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from engine.errors import LAYOUT_CONFLICT, ScenarioError
from engine.performance.frameworks import FrameworkProfile, named_profile, profile_at
from engine.schema.enums import Framework
from engine.schema.types import ScenarioSpec
from engine.units import Arr, BoolArr

Columns = Mapping[str, Arr]


@dataclass(frozen=True)
class LayoutRule:
    """One limit of a stack on the layouts it runs."""

    field: str  # the scenario field a refusal names
    columns: frozenset[str]  # the layout columns the rule reads (it applies once all exist)
    binds: Callable[[FrameworkProfile], bool]  # whether this profile restricts at all (a free rule costs nothing)
    runs: Callable[[FrameworkProfile, ScenarioSpec, Columns], BoolArr]  # per layout: the stack runs it
    why: Callable[[FrameworkProfile], str]  # the rule as the stack's source states it, and the fix
    named_only: bool = False  # applies to a named framework only (not to ``auto``)


def _interleaved(c: Columns) -> BoolArr:
    return np.asarray(c["vpp"] > 1)


def _microbatches(s: ScenarioSpec, c: Columns) -> Arr:
    """Micro-batches per step of every layout: global_batch / (dp x micro_batch)."""
    return s.training.global_batch / (c["dp"] * c["mb"])


# What each stack's source says where it refuses ZeRO beside pipeline or expert parallelism
_TORCH_FSDP2 = "Megatron's --use-torch-fsdp2, its only ZeRO-3 from 2024-11 to 2025-02: \"not supported with {} parallelism\""
_DEEPSPEED_PIPE = "DeepSpeed's pipeline engine: \"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\""


def _zero_beside(column: str, kind: str, limit: Callable[[FrameworkProfile], int], fix: str) -> LayoutRule:
    """The highest ZeRO stage a stack runs beside ``column`` > 1 (pipeline or expert parallelism)."""
    def why(f: FrameworkProfile) -> str:
        source = _DEEPSPEED_PIPE if f.name == Framework.DEEPSPEED else _TORCH_FSDP2.format(kind)
        return f"runs ZeRO stages up to {limit(f)} with {kind} parallelism ({source}): use zero {limit(f)} or lower, or {fix}"

    return LayoutRule(
        field="training.zero", columns=frozenset({"zero", column}), named_only=True,
        binds=lambda f: limit(f) < 3,
        runs=lambda f, s, c: (c[column] == 1) | (c["zero"] <= limit(f)),
        why=why)


RULES: tuple[LayoutRule, ...] = (
    LayoutRule(
        field="parallelism.vpp", columns=frozenset({"vpp"}),
        binds=lambda f: not f.interleaved_pipeline,
        runs=lambda f, s, c: ~_interleaved(c),
        why=lambda f: "has no interleaved pipeline schedule (DeepSpeed's pipeline engine runs 1F1B only; Megatron-LM "
                      "has one from 2021-02): use vpp 1"),
    LayoutRule(
        field="parallelism.vpp", columns=frozenset({"vpp", "pp"}),
        binds=lambda f: f.interleaved_pipeline and f.interleaved_min_pp > 2,
        runs=lambda f, s, c: ~_interleaved(c) | (c["pp"] >= f.interleaved_min_pp),
        why=lambda f: f"runs its interleaved pipeline schedule with pp >= {f.interleaved_min_pp} only (pp = 2 from "
                      "2024-05): use vpp 1 or more pipeline stages"),
    LayoutRule(
        field="parallelism.vpp", columns=frozenset({"vpp", "pp", "dp", "mb"}),
        binds=lambda f: f.interleaved_pipeline and f.interleaved_microbatch_multiple,
        runs=lambda f, s, c: ~_interleaved(c) | (np.mod(_microbatches(s, c), c["pp"]) == 0),
        why=lambda f: "runs its interleaved pipeline schedule only with micro-batches per step (global_batch / (dp x "
                      "micro_batch)) divisible by pp, which no layout here has: use vpp 1, or a global_batch, dp or "
                      "micro_batch that gives such a count"),
    LayoutRule(
        field="training.zero", columns=frozenset({"zero"}), named_only=True,
        binds=lambda f: f.max_zero < 3,
        runs=lambda f, s, c: np.asarray(c["zero"] <= f.max_zero),
        why=lambda f: f"does not implement this ZeRO stage (it runs up to ZeRO-{f.max_zero}; ZeRO-1/2: "
                      "Megatron-LM's distributed optimizer from 2022-06; ZeRO-3: DeepSpeed from 2021-03, "
                      "Megatron-Core from 2024-11)"),
    _zero_beside("pp", "pipeline", lambda f: f.max_zero_with_pp, "pp 1"),
    _zero_beside("ep", "expert", lambda f: f.max_zero_with_ep, "ep 1, or a release from 2025-02 (Megatron-FSDP)"),
)


def rules_profile(s: ScenarioSpec) -> tuple[FrameworkProfile, bool]:
    """The profile whose rules bind the scenario's layouts, and whether it is a named framework's (not ``auto``'s
    Megatron-Core record for layouts with pipeline stages)."""
    t = s.training
    named = named_profile(t.framework, t.framework_release)
    if named is not None:
        return named, True
    return profile_at(Framework.MEGATRON_CORE, t.framework_release), False


class LayoutGate:
    """The rules of one scenario's stack, applied to a layout table as its columns appear (api.candidate_layouts)."""

    def __init__(self, s: ScenarioSpec) -> None:
        self._s = s
        self._profile, named = rules_profile(s)
        self._pending = [r for r in RULES if r.binds(self._profile) and (named or not r.named_only)]

    def __call__(self, base: dict[str, Arr]) -> dict[str, Arr]:
        """``base`` without the layouts the stack cannot run, for every pending rule whose columns exist; a rule
        that leaves no layout of a non-empty table is refused naming its field."""
        ready = [r for r in self._pending if r.columns <= base.keys()]
        for rule in ready:
            self._pending.remove(rule)
            if len(next(iter(base.values()))) == 0:
                continue
            keep = rule.runs(self._profile, self._s, base)
            if not keep.any():
                raise ScenarioError(rule.field, f"{self._given(rule.field)}: {self._stack()} {rule.why(self._profile)}",
                                    LAYOUT_CONFLICT)
            base = {k: v[keep] for k, v in base.items()}
        return base

    def _stack(self) -> str:
        t = self._s.training
        at = f" (release {t.framework_release})" if t.framework_release else ""
        return f"{t.framework or Framework.MEGATRON_CORE}{at}"

    def _given(self, field: str) -> object:
        """The value a refusal quotes: the fixed one, else the largest listed."""
        if field == "training.zero":
            return self._s.training.zero
        p = self._s.parallelism
        return p.vpp if p.vpp is not None else max(p.allowed("vpp") or (0,))
