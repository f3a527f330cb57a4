"""Validation of the performance model against published training runs.

``validation_rows()`` predicts every run of a published-runs document (engine/data/validation/
published_runs.json by default; the data ships with the engine package) and compares like with like: the run's ``measured`` key names the quantity (hardware or model
TFLOP/s per GPU, MFU, step time, tokens/s per GPU or GPU-hours). ``render_markdown()`` produces
docs/validation.md, with tables for the HOLDOUT runs (holdout_runs.json): published runs that were never
used to set any constant, the estimate of accuracy on unseen runs; the NETWORK-BOUND runs
(network_runs.json: MegaScale, MegaScale-MoE, Fire-Flyer) and the Blackwell runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.catalog import Catalog
from engine.performance.api import predict

REPO_ROOT = Path(__file__).resolve().parents[2]  # where manage.py validation_report writes docs/ by default
DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_RUNS = DATA_DIR / "published_runs.json"
HOLDOUT_RUNS = DATA_DIR / "holdout_runs.json"
BLACKWELL_RUNS = DATA_DIR / "blackwell_runs.json"
NETWORK_RUNS = DATA_DIR / "network_runs.json"
FABRIC_MEASUREMENTS = DATA_DIR / "fabric_measurements.json"
COMPARABLE = ("hardware_tflops_per_gpu", "model_tflops_per_gpu", "mfu", "step_time_s", "tokens_per_s_per_gpu",
              "gpu_hours")


@dataclass(frozen=True)
class ValidationRow:
    run_id: str
    source: str
    metric: str
    measured: float
    predicted: float
    parallelism: dict[str, Any]
    fits: bool
    mfu: float

    @property
    def error(self) -> float:
        """Signed relative error (predicted - measured) / measured."""
        return (self.predicted - self.measured) / self.measured


def load_runs(path: Path | str | None = None) -> list[dict[str, Any]]:
    doc = json.loads(Path(path or DEFAULT_RUNS).read_text(encoding="utf-8"))
    runs: list[dict[str, Any]] = doc["runs"]
    return runs


def validation_rows(runs: list[dict[str, Any]] | None = None, catalog: Catalog | None = None) -> list[ValidationRow]:
    rows: list[ValidationRow] = []
    for run in runs if runs is not None else load_runs():
        measured: dict[str, float] = run["measured"]
        metric = next(k for k in COMPARABLE if k in measured)
        result = predict(run["scenario"], catalog=catalog)
        rows.append(
            ValidationRow(
                run_id=run["id"],
                source=run.get("source", ""),
                metric=metric,
                measured=float(measured[metric]),
                predicted=float(getattr(result, metric)),
                parallelism=result.parallelism,
                fits=result.fits,
                mfu=result.mfu,
            )
        )
    return rows


def summary(rows: list[ValidationRow]) -> dict[str, float]:
    errors = [abs(r.error) for r in rows]
    return {
        "rows": float(len(rows)),
        "mape": sum(errors) / len(errors) if errors else 0.0,
        "worst": max(errors) if errors else 0.0,
    }


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _table(rows: list[ValidationRow]) -> list[str]:
    lines = [
        "| run | metric | measured | predicted | error | layout used (tp/pp/dp/cp, vpp, mb, recompute, zero) | fits | source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = r.parallelism
        layout = (
            f"{p['tp']}/{p['pp']}/{p['dp']}/{p['cp']}, vpp {p['vpp']}, mb {p['micro_batch']}, "
            f"{p['recompute']}, zero {p['zero']}"
        )
        if p.get("ep", 1) > 1:
            layout += f", ep {p['ep']}"
        lines.append(
            f"| {r.run_id} | {r.metric} | {_fmt(r.measured)} | {_fmt(r.predicted)} | {r.error * 100:+.1f}% | "
            f"{layout} | {'yes' if r.fits else 'no'} | {r.source} |"
        )
    return lines


def _blackwell_section() -> list[str]:
    """Blackwell (B200) rows with same-release H100 controls (tests/data/blackwell_runs.json)."""
    if not BLACKWELL_RUNS.exists():
        return []
    runs = load_runs(BLACKWELL_RUNS)
    rows = validation_rows(runs)
    b200 = [r for run, r in zip(runs, rows, strict=True) if run.get("role") != "control"]
    ctrl = [r for run, r in zip(runs, rows, strict=True) if run.get("role") == "control"]
    bs, cs = summary(b200), summary(ctrl)
    bias = sum(r.error for r in b200) / len(b200) if b200 else 0.0
    lines = [
        "## Blackwell set (B200, never used to set a constant)",
        "",
        "`engine/validation/data/blackwell_runs.json`: NVIDIA NeMo 25.02 and Megatron-Bridge 25.11 performance-summary rows on",
        "DGX-B200, with H100 rows of the same releases as controls. Blackwell uses Hopper's efficiency fractions;",
        "these rows were checked for a common-sign bias before deciding not to change them (docs/performance-model.md,",
        "section 8). tokens/s per GPU is compared (the two releases count attention FLOPs differently).",
        "",
        f"**B200: MAPE {bs['mape'] * 100:.1f}% over {int(bs['rows'])} runs; worst row {bs['worst'] * 100:.1f}%; "
        f"mean signed error {bias * 100:+.1f}%. H100 controls: MAPE {cs['mape'] * 100:.1f}% over "
        f"{int(cs['rows'])} runs; worst row {cs['worst'] * 100:.1f}%.**",
        "",
    ]
    lines += _table(rows)
    lines += [
        "",
        "Notes:",
        "",
        "- The 405B rows on B200 were -25% and -29% while the memory model sent them to full recomputation; with",
        "  usable HBM in binary bytes and Megatron's first-stage in-flight count (docs/performance-model.md,",
        "  section 6) they run without recomputation and are within 7%.",
        "- Nemotron-4 15B on B200 (+21%) is the largest optimistic row; the H100 controls of the 2025 releases",
        "  (GPT-3 175B, Llama 3 8B: -16% to -17%) are the most pessimistic.",
        "",
    ]
    return lines


def render_markdown(rows: list[ValidationRow], holdout: list[ValidationRow] | None = None) -> str:
    """The validation report; ``holdout`` defaults to predicting holdout_runs.json."""
    if holdout is None:
        holdout = validation_rows(load_runs(HOLDOUT_RUNS)) if HOLDOUT_RUNS.exists() else []
    s = summary(rows)
    sets = [("Reference (public)", rows), ("Holdout", holdout)]
    if NETWORK_RUNS.exists():
        net_rows = validation_rows(load_runs(NETWORK_RUNS))
        sets += [("Network-bound", net_rows),
                 ("Network-bound without the Megatron-LM MoE arm",
                  [r for r in net_rows if r.run_id != "megascale-moe-352b-megatronlm-1440"])]
    if BLACKWELL_RUNS.exists():
        sets.append(("Blackwell (B200 + H100 controls)", validation_rows(load_runs(BLACKWELL_RUNS))))
    overview = ["| set | runs | MAPE | worst row | rows worse than 25% |", "|---|---|---|---|---|"]
    for name, rs in sets:
        if rs:
            ss = summary(rs)
            bad = sum(1 for r in rs if abs(r.error) > 0.25)
            overview.append(f"| {name} | {int(ss['rows'])} | {ss['mape'] * 100:.1f}% | {ss['worst'] * 100:.1f}% | {bad} |")
    lines = [
        "# Validation against published runs",
        "",
        "Generated by `python manage.py validation_report` from `engine/validation/data/`; do not edit",
        "by hand. Every row is predicted with the same constants (one set per GPU family, see",
        "docs/performance-model.md); settings a source does not give are `auto` and resolved by the search",
        "(fastest layout that fits). The compared quantity is the one the source measured.",
        "",
        *overview,
        "",
        f"**Reference set: MAPE {s['mape'] * 100:.1f}% over {int(s['rows'])} runs; worst row {s['worst'] * 100:.1f}%.**",
        "",
    ]
    lines += _table(rows)
    lines += [
        "",
        "Notes:",
        "",
        "- `fits = no` means the memory model puts the layout above the usable HBM (then `predict` reports null",
        "  throughput). Llama 3 405B with Meta's layout (TP8 PP16, seq 8192, no recomputation) fits at 75.4 GB",
        "  with 4 virtual stages: Megatron's interleaved warm-up with the short first virtual stage Meta",
        "  describes (docs/performance-model.md, section 6).",
        "- The Megatron SC21 rows are fp16 (same A100 peak as bf16) with full recomputation; their",
        "  hardware TFLOP/s count the recomputed forward. They use Megatron-LM's unfused attention (the",
        "  Ampere default, `training.attention: auto`), modelled as score GEMMs plus HBM traffic.",
        "",
    ]
    if holdout:
        hs = summary(holdout)
        lines += [
            "## Holdout set (never used to set a constant)",
            "",
            "`holdout_runs.json`: published runs added after the constants were fixed, to estimate the",
            "error on unseen runs. No constant was tuned on these rows; changes made while they existed are",
            "physical terms justified independently (docs/performance-model.md, section 10).",
            "",
            f"**Holdout: MAPE {hs['mape'] * 100:.1f}% over {int(hs['rows'])} runs; worst row {hs['worst'] * 100:.1f}%.**",
            "",
        ]
        lines += _table(holdout)
        lines += [
            "",
            "Notes:",
            "",
            "- MoE rows (DeepSeek-V2 bf16, DeepSeek-V3 fp8, H800) are predicted fast: V2 by 17%, V3 by 10%. The",
            "  busiest expert-parallel rank sets the MoE layer's pace (expert load imbalance, moe_balance.py), and",
            "  V2's bf16 routed experts run on the warp-level grouped-GEMM kernels of 2024 Hopper stacks",
            "  (`training.expert_kernel`, docs/performance-model.md section 2; V3's fp8 experts run Hopper-native).",
            "  The expert all-to-all is modelled as deduplicated per node, fp8 in the dispatch direction with fp8, and",
            "  hidden behind another micro-batch's compute in the pipeline steady state (DualPipe-style; V2's",
            "  2024 stack overlapped only the shared experts, about 8% of its step). Not modelled: MLA (approximated",
            "  as 128-head MQA, about 5% less attention work), V2's partial recomputation beyond `selective`,",
            "  V3's multi-token-prediction module (about 2%), routing/permutation kernels beyond their HBM traffic,",
            "  and GPU-hours that include the run's non-productive time. DeepSeek 67B (dense, same cluster) is within 10%.",
            "- MT-NLG 530B (DeepSpeed 2021) is predicted 17-20% too fast while Megatron-LM's own 530B rows",
            "  (reference set) are within 9%: a software-stack difference the scenario does not describe.",
            "- The MPT fp8 row (Transformer Engine in Composer, 2023, a 2.7B model) is predicted too fast: small",
            "  fp8 GEMMs and un-fused casts of that stack are slower than the modelled cast traffic.",
            "",
        ]
    lines += _network_section()
    lines += _blackwell_section()
    return "\n".join(lines)


def _network_section() -> list[str]:
    """Network-bound published runs (network_runs.json): where the fabric dominates the step."""
    if not NETWORK_RUNS.exists():
        return []
    rows = validation_rows(load_runs(NETWORK_RUNS))
    ns = summary(rows)
    weak = [r for r in rows if abs(r.error) > 0.25]
    lines = [
        "## Network-bound set",
        "",
        "`network_runs.json`: published runs where communication dominates (MegaScale GPT-175B at 256-12,288",
        "A100 on 8 x 200 Gb/s RoCE, MegaScale-MoE 352B on H800, Fire-Flyer DeepSeekMoE-16B on one 200 Gb/s NIC per",
        "8 GPUs). Constants are the global ones (collectives.py, routing.py, frameworks.py); no row has its own.",
        "",
        f"**Network-bound: MAPE {ns['mape'] * 100:.1f}% over {int(ns['rows'])} runs; worst row "
        f"{ns['worst'] * 100:.1f}%; {len(weak)} rows worse than 25%.**",
        "",
    ]
    lines += _table(rows)
    lines += [
        "",
        "Notes (where the model is still weak):",
        "",
        "- MegaScale-MoE 352B: the shape carries one shared expert. The paper's name (352B) and its reported MFU",
        "  (32.48% / 27.89%) are both reproduced only with 4 active expert FFNs of 33 per layer (32 routed top-3 + 1",
        "  shared: 351.9B parameters, 282.5 GFLOP per token); without it the rows were 31-35% fast. The MegaScale-MoE",
        "  arm (SP 8 attention approximated by CP 8, EP 8 inside the node) is then within 9%, and the engine",
        "  reproduces the source's own ablation (Table 5: TP 8 for attention and FFN is 1.28x slower than SP + EP",
        "  with overlap; engine 1.26x, tests/engine/test_moe_kernels.py).",
        "- The Megatron-LM arm of MegaScale-MoE (7.9 s at 1,440 GPUs) is the one row worse than 25%: predicted",
        "  41% fast. Its scenario follows the source: commit f1f03922's all-gather token dispatcher",
        "  (`training.moe_dispatcher`, Megatron-Core's default; the paper's torch scatter_add / gather permutation",
        "  is that dispatcher's) with EP 2 across nodes and TP 8 + SP. The engine's communication for it is 0.4 s",
        "  of TP and 0.65 s of dispatcher traffic (all-gather of the TP x EP group's tokens, reduce-scatter of the",
        "  outputs, over the NICs, never overlapped) in a predicted 4.7 s (EP 4 would give 5.5 s). The source's",
        "  own TP+TP variant without overlap is already ~1.4x faster than this arm (Table 5 vs Table 3) and the",
        "  engine reproduces that variant from communication volumes: the rest is that commit's MoE kernels",
        "  (unfused gather / scatter_add permutation, per-expert loop), not the network. It is not fitted.",
        "- MegaScale 175B rows are within 13% (Megatron-LM arm at 1,024 GPUs +13% in MFU, i.e. predicted fast):",
        "  the scenario says only `roce`, so the default ECMP share applies where MegaScale tuned its hashing",
        "  (Sec. 3.6).",
        "",
    ]
    return lines
