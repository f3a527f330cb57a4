"""Public entry points of the training performance engine: ``predict`` and ``search``.

Both build arrays of candidate layouts and call the one vectorised model in
:mod:`engine.performance.model`; ``predict`` on a fully specified layout evaluates an array of length 1.
Settings given as ``"auto"`` are searched; the fastest layout that fits in memory wins.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from engine.budget import checkpoint
from engine.catalog import CatalogItems
from engine.document.parse import parse_scenario
from engine.errors import LAYOUT_CONFLICT, NO_LAYOUT, ScenarioError
from engine.fabric.topology import fabric_block
from engine.performance.calibrated import overlay_from_scenario
from engine.performance.context import (
    DP_OUTER,
    DP_PLACEMENT_CODES,
    FRAMEWORK_DP_PLACEMENT,
    RECOMPUTE_CODES,
    ZERO_STAGES,
    Context,
    Layouts,
    make_context,
)
from engine.performance.error_bands import figure_intervals, throughput_band
from engine.performance.hardware import gpu_spec
from engine.performance.layout_rules import LayoutGate
from engine.performance.model import BREAKDOWN_KEYS, LayoutEvaluation, concat_evaluations, divisors, evaluate
from engine.performance.result import NULL_WHEN_UNFIT, Alternative, Result, SearchResult
from engine.performance.terms.memory import MEMORY_MODEL_UNCERTAINTY, memory_uncertain, usable_memory_bytes
from engine.schema.bounds import LAYOUT_CHUNK, MAX_LAYOUTS, check_work
from engine.schema.enums import CpCommType, DpPlacement
from engine.schema.types import ScenarioSpec
from engine.units import GIGA, SECONDS_PER_DAY, SECONDS_PER_HOUR, TERA, Arr

ResultT = TypeVar("ResultT", bound=Result)

# The largest value the search tries for a setting left "auto" (docs/performance-model.md s.7). These bound the
# enumeration, not the document: a scenario may fix larger values within engine.schema.bounds (MAX_MICRO_BATCH).
MAX_TP = 64
MAX_CP = 32
SEARCH_MAX_MICRO_BATCH = 128
MAX_VPP = 16
# An alternative within this share of the winner's step time is reported as a tie.
TIE_PERCENT = 0.05
PERCENT = 100.0


# ------------------------------------------------------------------------------------------- candidates


def _cross(base: dict[str, Arr], name: str, options: Arr) -> dict[str, Arr]:
    """Cartesian product of the rows in ``base`` with ``options`` for a new column ``name``."""
    n = len(next(iter(base.values()))) if base else 1
    check_work("candidate layouts", n * len(options), MAX_LAYOUTS, "parallelism",  # before allocating
               hint='fix some parallelism degrees, training.micro_batch or training.recompute instead of "auto"')
    out = {k: np.repeat(v, len(options)) for k, v in base.items()}
    out[name] = np.tile(options.astype(np.float64), n)
    return out


def _evaluate(ctx: Context, lay: Layouts) -> LayoutEvaluation:
    """``evaluate`` in chunks of ``LAYOUT_CHUNK`` layouts with a budget checkpoint between chunks: memory stays
    bounded and a web request's time budget or a run's cancel stops a long search (engine/budget.py)."""
    checkpoint()
    n = len(lay)
    if n <= LAYOUT_CHUNK:
        return evaluate(ctx, lay)
    parts: list[LayoutEvaluation] = []
    for start in range(0, n, LAYOUT_CHUNK):
        idx = np.arange(start, min(n, start + LAYOUT_CHUNK), dtype=np.intp)
        parts.append(evaluate(ctx, lay.take(idx)))
        checkpoint()
    return concat_evaluations(parts)


def _filter(base: dict[str, Arr], keep: npt.NDArray[np.bool_]) -> dict[str, Arr]:
    return {k: v[keep] for k, v in base.items()}


def _opts(value: int | None, auto: Callable[[], list[int]], allowed: tuple[int, ...] | None = None) -> Arr:
    """The fixed ``value``, the ``allowed`` values the scenario lists for a searched degree, or the "auto"
    options (computed only when needed: a fixed layout pays nothing)."""
    if value is not None:
        return np.asarray([value], dtype=np.float64)
    return np.asarray(list(allowed) if allowed is not None else auto(), dtype=np.float64)


def candidate_layouts(s: ScenarioSpec) -> Layouts:
    """Every layout allowed by the scenario: fixed settings as given, "auto" ones enumerated."""
    m, t, p, c = s.model, s.training, s.parallelism, s.cluster
    gpus = c.gpus
    base: dict[str, Arr] = {"tp": _opts(p.tp, lambda: [d for d in divisors(m.heads) if d <= MAX_TP and gpus % d == 0],
                                        p.allowed("tp"))}
    base = _cross(base, "pp", _opts(p.pp, lambda: [d for d in divisors(gpus) if d <= m.layers], p.allowed("pp")))
    base = _cross(base, "cp", _opts(p.cp, lambda: [d for d in divisors(math.gcd(m.seq_len, gpus)) if d <= MAX_CP],
                                    p.allowed("cp")))
    base = _ulysses_heads(s, base)
    prod = base["tp"] * base["pp"] * base["cp"]
    base = _filter(base, np.mod(gpus, prod) == 0)
    base["dp"] = gpus / (base["tp"] * base["pp"] * base["cp"])
    if p.dp is not None:
        base = _filter(base, base["dp"] == p.dp)
    base = _filter(base, np.mod(t.global_batch, base["dp"]) == 0)
    base = _dp_orders(s, base)
    if m.moe is not None:
        experts = m.moe.experts
        base = _cross(base, "ep", _opts(p.ep, lambda: [d for d in divisors(experts) if d <= gpus], p.allowed("ep")))
        base = _expert_grid(base, p.etp)
    else:
        base = _cross(base, "ep", _opts(p.ep if p.ep is not None else 1, lambda: [1]))
    base = _cross(base, "vpp", _opts(p.vpp, lambda: list(range(1, MAX_VPP + 1)), p.allowed("vpp")))
    places = p.pipeline_slots(m.layers)  # the layers (+ embedding and loss when they take a place each)
    per_stage = np.ceil(places / base["pp"])
    ok = (base["pp"] * base["vpp"] <= places) & ((base["pp"] > 1) | (base["vpp"] == 1))
    if p.vpp is None:  # auto: only vpp that split the stage's layers evenly
        ok &= np.mod(per_stage, base["vpp"]) == 0
    if p.embedding_loss_in_split:  # Megatron-Core splits L + 2 places only into whole stages and chunks
        ok &= (base["pp"] == 1) | ((np.mod(places, base["pp"]) == 0) & (np.mod(per_stage, base["vpp"]) == 0))
    base = _filter(base, ok)
    runs = LayoutGate(s)  # the stack's rules (layout_rules.py), each applied once the columns it reads exist
    base = runs(base)
    base = _cross(base, "mb", _opts(t.micro_batch, lambda: [d for d in divisors(t.global_batch)
                                                            if d <= SEARCH_MAX_MICRO_BATCH]))
    base = runs(_filter(base, np.mod(t.global_batch, base["dp"] * base["mb"]) == 0))
    rc = None if t.recompute is None else RECOMPUTE_CODES[t.recompute]
    base = _cross(base, "recompute", _opts(rc, lambda: sorted(RECOMPUTE_CODES.values())))
    base = _cross(base, "zero", _opts(t.zero, lambda: list(ZERO_STAGES)))
    base = runs(base)
    base = _shard_groups(t.shard_group, base)
    sp = base["tp"] > 1 if p.sequence_parallel is None else np.full_like(base["tp"], p.sequence_parallel, dtype=bool)
    if len(base["tp"]) == 0:
        raise ScenarioError("parallelism", "no layout satisfies the fixed settings (tp*pp*dp*cp = gpus, "
                            "global_batch divisible by dp*micro_batch, pp*vpp <= layers)", NO_LAYOUT)
    etp = None if p.etp is None else np.full_like(base["tp"], float(p.etp))
    return Layouts(tp=base["tp"], pp=base["pp"], dp=base["dp"], cp=base["cp"], ep=base["ep"], vpp=base["vpp"],
                   mb=base["mb"], recompute=base["recompute"], zero=base["zero"], sp=np.asarray(sp),
                   dp_order=base["dp_order"], etp=etp)


# The document paths check_runnable reads: the layout space (model, training, parallelism, cluster.gpus) and the GPU
# whose precisions make_context checks. Documents equal on these pass or fail it together, so a caller validating
# many documents (a sweep) checks once per distinct value (planning.runnable_key); a new input the layout search or
# the context's checks read must be added here (tests/engine/performance/test_runnable_inputs.py).
RUNNABLE_INPUTS: tuple[str, ...] = ("model", "training", "parallelism", "cluster.gpus", "cluster.gpu")


def check_runnable(s: ScenarioSpec, catalog: CatalogItems | None = None) -> None:
    """Raise :class:`ScenarioError` naming the field where ``predict`` would refuse a parsed scenario before
    evaluating it: a precision the GPU has no tensor cores for (the model context's checks), fixed settings that
    leave no layout (a framework that cannot run a given vpp or ZeRO stage at its release, degrees whose product or
    expert grid leaves nothing). The parser's checks are per field; these need the GPU and the whole layout space,
    so the platform calls this at save time too, and a scenario that could not run is refused when it is saved; so
    is a search too large to enumerate (the estimate's refusal names the degrees to fix), which no run could do."""
    make_context(s, gpu_spec(s.cluster.gpu, catalog))
    candidate_layouts(s)


def _ulysses_heads(s: ScenarioSpec, base: dict[str, Arr]) -> dict[str, Arr]:
    """All-to-all context parallelism (training.cp_comm_type a2a) splits each TP rank's query heads and key/value
    heads over the CP ranks (Transformer Engine asserts both divisible by the CP size; key/value heads fewer than
    the TP ranks are replicated, one per rank): keep the layouts where they divide."""
    if s.training.cp_comm_type != CpCommType.A2A:
        return base
    m, tp, cp = s.model, base["tp"], base["cp"]
    q_heads, kv_heads = m.heads / tp, np.maximum(m.kv_heads / tp, 1.0)
    ok = (cp == 1) | ((np.mod(q_heads, cp) == 0) & (np.mod(kv_heads, cp) == 0))
    if len(tp) and not np.any(ok):
        raise ScenarioError("training.cp_comm_type", f"a2a (Ulysses) splits each TP rank's heads over the CP ranks: "
                            f"no layout has model.heads={m.heads} and model.kv_heads={m.kv_heads} per TP rank "
                            f"divisible by parallelism.cp (use p2p or all-gather, or a smaller cp)", LAYOUT_CONFLICT)
    return _filter(base, ok)


def _expert_grid(base: dict[str, Arr], etp: int | None) -> dict[str, Arr]:
    """The EP degrees a layout can hold. Without ``parallelism.etp`` experts are tensor-parallel like attention and
    EP is drawn from the d c ranks: ep divides dp * cp. With it (MoE parallel folding, never searched) the expert
    grid etp x ep x edp folds over the attention's t c d ranks: etp * ep divides tp * cp * dp; none left is a
    conflict naming the field."""
    if etp is None:
        return _filter(base, np.mod(base["dp"] * base["cp"], base["ep"]) == 0)
    if len(base["tp"]) == 0:
        return base
    kept = _filter(base, np.mod(base["tp"] * base["cp"] * base["dp"], etp * base["ep"]) == 0)
    if len(kept["tp"]) == 0:
        raise ScenarioError("parallelism.etp", f"{etp} x ep divides no layout's tp*cp*dp ranks (MoE parallel "
                            "folding needs etp * ep to divide tp * cp * dp): use a smaller etp or ep", LAYOUT_CONFLICT)
    return kept


def _shard_groups(group: int | None, base: dict[str, Arr]) -> dict[str, Arr]:
    """HSDP (training.shard_group): only layouts whose d c ranks the group divides and whose CP degree divides the
    group (a shard group holds whole CP blocks); none left is a conflict naming the field."""
    if group is None or len(base["tp"]) == 0:
        return base
    dpc = base["dp"] * base["cp"]
    kept = _filter(base, (np.mod(dpc, group) == 0) & (np.mod(group, base["cp"]) == 0))
    if len(kept["tp"]) == 0:
        raise ScenarioError("training.shard_group", f"{group} ranks per shard group divides no layout's data x "
                            "context parallel ranks (or holds no whole CP group): use a divisor of dp x cp that is "
                            "a multiple of cp, or auto", LAYOUT_CONFLICT)
    return kept


def _dp_orders(s: ScenarioSpec, base: dict[str, Arr]) -> dict[str, Arr]:
    """The DP placements to try (parallelism.dp_placement; auto = the named framework's default order; with the
    framework auto, both where the search searches degrees, the engine's Megatron order where every degree is
    fixed). A searched outer placement is dropped where it equals the inner one (pp or dp = 1)."""
    placement = s.parallelism.dp_placement
    if placement is None and s.training.framework is not None:
        placement = FRAMEWORK_DP_PLACEMENT[s.training.framework]
    elif placement is None and all(getattr(s.parallelism, k) is not None for k in ("tp", "pp", "cp", "ep", "vpp")):
        placement = DpPlacement.INNER
    code = None if placement is None else DP_PLACEMENT_CODES[placement]
    base = _cross(base, "dp_order", _opts(code, lambda: sorted(DP_PLACEMENT_CODES.values())))
    if code is not None:
        return base
    return _filter(base, (base["dp_order"] != DP_OUTER) | ((base["pp"] > 1) & (base["dp"] > 1)))


# ---------------------------------------------------------------------------------------------- results


def _result_at(s: ScenarioSpec, ctx: Context, lay: Layouts, out: LayoutEvaluation, i: int) -> Result:
    gpus = float(s.cluster.gpus)
    step = float(out.step_time_s[i])
    tps = float(out.tokens_per_s[i])
    model_tf = float(out.model_flops[i]) / step / gpus
    hw_tf = float(out.hardware_flops[i]) / step / gpus
    peak = ctx.peak
    train_s = s.training.tokens / tps
    notes: list[str] = []
    if s.training.precision == "fp8" and ctx.gpu.peak_fp8_flops is None:
        notes.append(f"{s.cluster.gpu} has no fp8 tensor cores; bf16 peak used")
    fits = bool(out.fits[i])
    if not fits:
        notes.append("does not fit in GPU memory with this layout")
    if bool(memory_uncertain(out.memory_bytes[i:i + 1], ctx.gpu)[0]):
        notes.append(f"memory_uncertain: {float(out.memory_bytes[i]) / GIGA:.1f} GB modelled against "
                     f"{_usable_gb(ctx):.1f} GB usable is within the memory model's "
                     f"{MEMORY_MODEL_UNCERTAINTY:.0%} band; whether it fits is not certain")
    source = {k: v for k, v in ctx.routing_source.items() if k != "note"} or {"kind": "shipped"}
    note = ctx.routing_source.get("note")
    if note:  # a pinned fabric study (pinned_study.py): used, or why the shipped tables were
        notes.append(str(note))
    par = lay.parallelism(i)
    return Result(
        step_time_s=step,
        tokens_per_s=tps,
        tokens_per_s_per_gpu=tps / gpus,
        model_tflops_per_gpu=model_tf / TERA,
        hardware_tflops_per_gpu=hw_tf / TERA,
        mfu=model_tf / peak,
        hfu=hw_tf / peak,
        memory_gb_per_gpu=float(out.memory_bytes[i]) / GIGA,
        memory_limit_gb=_usable_gb(ctx),
        fits=fits,
        time_to_train_days=train_s / SECONDS_PER_DAY,
        gpu_hours=train_s * gpus / SECONDS_PER_HOUR,
        network_wait_fraction=float(out.network_wait_fraction[i]),
        breakdown_s={k: float(getattr(out.breakdown_s, k)[i]) for k in BREAKDOWN_KEYS},
        parallelism=par,
        gpu=s.cluster.gpu,
        gpus=s.cluster.gpus,
        precision=s.training.precision,
        notes=notes,
        fabric=fabric_block(s.topology) if s.topology is not None else {},
        routing_source=source,
    )


def _usable_gb(ctx: Context) -> float:
    return usable_memory_bytes(ctx.gpu) / GIGA


_LABELS = {
    "compute": "compute", "tp_comm": "tensor-parallel communication", "cp_comm": "context-parallel communication",
    "ep_comm": "expert all-to-all", "pp_comm": "pipeline send/recv", "pp_bubble": "pipeline bubble",
    "dp_comm_exposed": "exposed data-parallel communication", "optimizer": "optimizer step",
    "stragglers": "waiting for the slowest rank",
}


def _why(best: Result, alt: Result) -> str:
    if alt.breakdown_s is None or best.breakdown_s is None or alt.step_time_s is None or best.step_time_s is None:
        return f"does not fit in GPU memory (needs {alt.memory_gb_per_gpu:.1f} GB per GPU)"
    diff = {k: alt.breakdown_s[k] - best.breakdown_s[k] for k in BREAKDOWN_KEYS}
    key = max(diff, key=lambda k: diff[k])
    pct = (alt.step_time_s / best.step_time_s - 1.0) * PERCENT
    if pct <= TIE_PERCENT:
        return "ties with the chosen layout within 0.05%; the chosen one uses less memory or sorts first"
    return (
        f"{pct:.1f}% slower: {_LABELS[key]} {alt.breakdown_s[key]:.3g} s vs {best.breakdown_s[key]:.3g} s per step"
    )


def _prepare(scenario: Mapping[str, Any] | ScenarioSpec, catalog: CatalogItems | None,
             calibration: Any = None) -> tuple[ScenarioSpec, Context]:
    """Parse and build the model context; ``calibration`` (a calibration.Profile, duck-typed) may replace
    context fields through its ``apply_to_context(ctx) -> Context``."""
    s = parse_scenario(scenario, catalog)
    ctx = make_context(s, gpu_spec(s.cluster.gpu, catalog))
    if calibration is not None:
        ctx = calibration.apply_to_context(ctx)
    return s, ctx


def _document_calibration(s: ScenarioSpec, catalog: CatalogItems | None, calibration: Any) -> Any:
    """The overlay of the profile the document carries under ``calibration`` (issue #16), unless one is given."""
    if calibration is not None:
        return calibration
    return overlay_from_scenario(s, catalog)


def _calibration_note(r: Result, calibration: Any) -> Result:
    """The profile's residual factor (if any) and its note: ``calibration.finish(result)`` when it has one."""
    if calibration is None:
        return r
    finish = getattr(calibration, "finish", None)
    if finish is not None:
        out: Result = finish(r)
        return out
    note = getattr(calibration, "note", None)
    if note:
        r.notes.append(str(note))
    return r


def rank_layouts(out: LayoutEvaluation) -> tuple[npt.NDArray[np.intp], int]:
    """Indices sorted fits-first then by step time (then less memory); and the count that fit."""
    order = np.lexsort((out.memory_bytes, out.step_time_s, ~out.fits))
    return order.astype(np.intp), int(out.fits.sum())


def _attention_layouts(ctx: Context, lay: Layouts) -> Layouts:
    """Without fused attention there is no context parallelism: Megatron-Core's CP (ring attention) runs only on
    Transformer Engine's fused attention, so a stack whose attention is unfused (training.attention, or the GPU
    family's default) keeps CP = 1; CP never switches the kernel. A scenario that fixes CP > 1 there is refused."""
    if not ctx.unfused_attn:
        return lay
    keep = np.flatnonzero(lay.cp <= 1)
    if len(keep) == 0:
        raise ScenarioError("parallelism.cp", f"{int(lay.cp[0])}: context parallelism needs fused attention "
                            "(Megatron-Core ring attention runs on Transformer Engine's fused kernels) and this "
                            'stack\'s attention is unfused; set training.attention to "flash" or "native", or cp to 1')
    return lay if len(keep) == len(lay) else lay.take(keep.astype(np.intp))


def search(scenario: Mapping[str, Any] | ScenarioSpec, top_k: int = 5, catalog: CatalogItems | None = None,
           calibration: Any = None) -> SearchResult:
    """Fastest layout that fits, over every setting marked "auto" (a fixed scenario has one candidate).

    Returns the winner plus ``top_k`` runners-up, each with the reason it loses.
    """
    s = parse_scenario(scenario, catalog)
    calibration = _document_calibration(s, catalog, calibration)
    s, ctx = _prepare(s, catalog, calibration)
    lay = _attention_layouts(ctx, candidate_layouts(s))
    out = _evaluate(ctx, lay)
    order, n_fit = rank_layouts(out)
    if n_fit == 0:  # nothing runs: the leanest layouts, with what each needs (never a throughput)
        order = np.argsort(out.memory_bytes, kind="stable").astype(np.intp)
    best = _with_intervals(_calibration_note(_result_at(s, ctx, lay, out, int(order[0])), calibration), s)
    if n_fit == 0:
        best.notes.append(_unfit_note(best))
    alts: list[Alternative] = []
    limit = n_fit if n_fit > 0 else len(order)
    for j in order[1: min(limit, top_k + 1)]:
        r = _with_intervals(_calibration_note(_result_at(s, ctx, lay, out, int(j)), calibration), s)
        alts.append(Alternative(r, _why(best, r) if n_fit > 0 else
                                f"needs {r.memory_gb_per_gpu:.1f} GB per GPU (does not fit either)"))
    return SearchResult(
        **{k: getattr(best, k) for k in Result.__dataclass_fields__},
        alternatives=alts,
        candidates_evaluated=len(lay),
        candidates_feasible=n_fit,
    )


def predict(scenario: Mapping[str, Any] | ScenarioSpec, catalog: CatalogItems | None = None,
            calibration: Any = None) -> Result:
    """Predict one training run. "auto" settings are resolved by the search (the fastest layout that fits)."""
    s = parse_scenario(scenario, catalog)
    calibration = _document_calibration(s, catalog, calibration)
    s, ctx = _prepare(s, catalog, calibration)
    lay = _attention_layouts(ctx, candidate_layouts(s))
    out = _evaluate(ctx, lay)
    if len(lay) == 1:
        return _with_intervals(_calibration_note(_result_at(s, ctx, lay, out, 0), calibration), s)
    order, n_fit = rank_layouts(out)
    if n_fit == 0:  # nothing runs: report the leanest layout and what it needs, never a throughput
        r = _calibration_note(_result_at(s, ctx, lay, out, int(np.argmin(out.memory_bytes))), calibration)
        r.notes.append(_unfit_note(r))
        return r
    return _with_intervals(_calibration_note(_result_at(s, ctx, lay, out, int(order[0])), calibration), s)


def _with_intervals(r: ResultT, s: ScenarioSpec) -> ResultT:
    """The result with its 80% intervals (the error band of its regime); none for a layout that does not fit."""
    if not r.fits or r.network_wait_fraction is None:
        return r
    band = throughput_band({"network_wait_fraction": r.network_wait_fraction, "gpus": r.gpus,
                            "framework": s.training.framework or "auto"})
    r.intervals = figure_intervals({key: r.figure(key) for key in NULL_WHEN_UNFIT}, band)
    return r


def _unfit_note(leanest: Result) -> str:
    """What a planner needs when no layout fits: the leanest layout's memory against the GPU's."""
    return (f"no candidate layout fits in memory: the leanest needs {leanest.memory_gb_per_gpu:.1f} GB per GPU "
            f"of {leanest.memory_limit_gb:.1f} GB usable on {leanest.gpu}; use more GPUs, a GPU with more memory, "
            "or a smaller model or batch")
