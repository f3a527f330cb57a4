"""docs/validation.md from one :class:`~engine.validation.evaluate.Evaluation`: every set in-sample and
leave-one-source-out, the constants grounded on end-to-end rows, the error bands with their coverage and the
scaling series. No figure leaves a row out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.validation.bands import inside
from engine.validation.evaluate import Evaluation, SetResult
from engine.validation.notes import SET_TEXT
from engine.validation.registry import grounded_sources
from engine.validation.rows import ValidationRow, summary, worst_row
from engine.validation.runs import source_key
from engine.validation.summary import SCALING_TARGET_POINTS, SUMMARY_PATH

REPO_ROOT = Path(__file__).resolve().parents[2]  # where manage.py validation_report writes docs/ by default
BAD_ROW = 0.25  # the overview counts rows worse than this


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _pct(v: float, signed: bool = False) -> str:
    return f"{v * 100:+.1f}%" if signed else f"{v * 100:.1f}%"


def _worst(rows: Sequence[ValidationRow]) -> str:
    w = worst_row(rows)
    return f"{abs(w.error) * 100:.1f}% ({w.run_id})" if w else "-"


def _band(ev: Evaluation, run_id: str) -> tuple[str, str]:
    band = ev.loso_band.get(run_id)
    if band is None:
        return "-", "-"
    res = next(r for r in ev.residuals if r.run_id == run_id)
    return f"[{band[0]:.2f}, {band[1]:.2f}]", "yes" if inside(res, band) else "**no**"


def _table(ev: Evaluation, rows: Sequence[ValidationRow]) -> list[str]:
    lines = [
        "| run | metric | measured | predicted | error | layout used (tp/pp/dp/cp, vpp, mb, recompute, zero) | fits "
        "| exposed comm | 80% band (LOSO) | inside | source |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = r.parallelism
        layout = (
            f"{p['tp']}/{p['pp']}/{p['dp']}/{p['cp']}, vpp {p['vpp']}, mb {p['micro_batch']}, "
            f"{p['recompute']}, zero {p['zero']}"
        )
        if p.get("ep", 1) > 1:
            layout += f", ep {p['ep']}"
        band, hit = _band(ev, r.run_id)
        lines.append(
            f"| {r.run_id} | {r.metric} | {_fmt(r.measured)} | {_fmt(r.predicted)} | {r.error * 100:+.1f}% | "
            f"{layout} | {'yes' if r.fits else 'no'} | {r.network_wait_fraction * 100:.1f}% | {band} | {hit} | "
            f"{r.source} |"
        )
    return lines


def _headline(ev: Evaluation, name: str, s: SetResult) -> str:
    ins, loso = summary(s.rows), summary(s.loso)
    res = ev.residuals_of_set(s.run_set.key)
    hits = sum(1 for r in res if r.run_id in ev.loso_band and inside(r, ev.loso_band[r.run_id]))
    loso_txt = ("LOSO: identical (no constant is refit)" if not ev.refit else
                f"LOSO: MAPE {_pct(loso['mape'])}, worst row {_worst(s.loso)}, bias {_pct(loso['bias'], True)}")
    return (f"**{name}: MAPE {_pct(ins['mape'])} over {int(ins['rows'])} runs; worst row {_worst(s.rows)}; "
            f"bias {_pct(ins['bias'], True)}. {loso_txt}. 80% band coverage (LOSO) {hits}/{len(res)}.**")


def _grounded_line(ev: Evaluation, s: SetResult) -> str:
    grounded = grounded_sources(ev.constants)
    if not grounded:
        calibrating = {src for c in ev.constants for src in c.sources}
        n = sum(1 for r in s.rows if r.source_key in {source_key(x) for x in calibrating})
        return (f"Rows whose own source sets a row-derived constant: {n} of {len(s.rows)} (their LOSO figures use "
                "that constant refit without them).")
    n = sum(1 for r in s.rows if r.source_key in grounded)
    return (f"Rows whose own source set a constant that LOSO cannot refit: {n} of {len(s.rows)} (for those rows "
            "the in-sample and LOSO errors are calibration errors).")


def _overview(ev: Evaluation) -> list[str]:
    lines = [
        "| set | runs | MAPE | worst row | bias | LOSO MAPE | LOSO worst row | LOSO bias | rows worse than 25% "
        "| 80% band coverage (LOSO) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups = [(s.run_set.title, s.rows, s.loso, ev.coverage(s.run_set.key)) for s in ev.sets]
    groups.append(("All sets", [r for s in ev.sets for r in s.rows], [r for s in ev.sets for r in s.loso],
                   ev.coverage()))
    for name, rows, loso, cov in groups:
        if not rows:
            continue
        a, b = summary(rows), summary(loso)
        bad = sum(1 for r in rows if abs(r.error) > BAD_ROW)
        lines.append(
            f"| {name} | {int(a['rows'])} | {_pct(a['mape'])} | {_worst(rows)} | {_pct(a['bias'], True)} | "
            f"{_pct(b['mape'])} | {_worst(loso)} | {_pct(b['bias'], True)} | {bad} | {_pct(cov)} |"
        )
    return lines


def _constants_section(ev: Evaluation) -> list[str]:
    lines = [
        "## Constants grounded on end-to-end rows",
        "",
        "The rule (issue #22): constants come from component measurements; published runs only validate. The",
        "registry (engine/validation/registry.py) lists every engine constant whose stated source is a set of",
        "end-to-end training rows, with the hook that refits it leave-one-source-out.",
        "",
        *(_refit_text(ev)),
        "",
        "| constant | where | value | set from | sources | refit hook |",
        "|---|---|---|---|---|---|",
    ]
    for c in ev.constants:
        lines.append(f"| `{c.name}` | {c.where} | {c.value} | {c.grounded_on} | {'; '.join(c.sources)} | "
                     f"{'yes' if c.has_refit else 'none'} |")
    lines.append("")
    return lines + _refit_values(ev)


def _refit_values(ev: Evaluation) -> list[str]:
    """What each constant became with each of its sources held out (sources that moved nothing are left out)."""
    names = [c.name for c in ev.constants if c.current is not None]
    base = {c.name: c.current() for c in ev.constants if c.current is not None}
    moved = {src: vals for src, vals in ev.refits.items()
             if any(abs(vals.get(n, base[n]) - base[n]) > 1e-12 for n in names)}
    if not moved:
        return []
    lines = ["LOSO refit values: each constant as solved with one source held out (only the held-out sources that "
             "move a constant; every other source predicts with the values above). The values above were set by "
             "hand, jointly (with a TP overlap share that engine 2.17.0 replaced by the stack's source), not by "
             "this one-constant-at-a-time procedure, so a refit moves a constant whenever one of its sources is held "
             "out, even where its other rows alone would not have set the hand-set value.", "",
             "| held-out source | " + " | ".join(f"`{n}`" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for src in sorted(moved):
        cells = [f"{moved[src].get(n, base[n]):.3f}" for n in names]
        lines.append(f"| {src} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _refit_text(ev: Evaluation) -> list[str]:
    if not ev.refit:
        return ["**None has a refit hook, so nothing is refit without a source's rows and every LOSO figure above",
                "equals its in-sample figure.** The constants below were set by hand from the rows of the sources",
                "named: their sources' errors are calibration errors, not validation errors."]
    return ["**Every constant below has a refit hook (engine/validation/refit.py): for each held-out source it is",
            "solved again, from the reference-set rows of the remaining sources on its GPU family and precision,",
            "so that those rows are unbiased (mean log residual 0), and the held-out source's rows are predicted",
            "with it.** The LOSO columns are therefore validation errors for every row, the calibration sources'",
            "included. The constants are still set from end-to-end rows (a defect: each wants a component",
            "measurement); the gap between a calibration source's in-sample and LOSO error is what that costs."]


def _set_section(ev: Evaluation, s: SetResult) -> list[str]:
    text = SET_TEXT.get(s.run_set.key)
    lines = [text.heading if text else f"## {s.run_set.title}", ""]
    if text:
        lines += [*text.intro, ""]
    lines += [_headline(ev, s.run_set.title, s), "", _grounded_line(ev, s), ""]
    if s.run_set.key == "blackwell":
        lines += [_blackwell_split(s), ""]
    lines += _table(ev, s.rows)
    if text and text.notes:
        lines += ["", text.notes_title, "", *text.notes]
    lines.append("")
    return lines


def _blackwell_split(s: SetResult) -> str:
    b200 = [r for run, r in zip(s.runs, s.rows, strict=True) if run.get("role") != "control"]
    ctrl = [r for run, r in zip(s.runs, s.rows, strict=True) if run.get("role") == "control"]
    bs, cs = summary(b200), summary(ctrl)
    return (f"B200 rows: MAPE {_pct(bs['mape'])} over {int(bs['rows'])} runs; worst row {_worst(b200)}; "
            f"mean signed error {_pct(bs['bias'], True)}. H100 controls: MAPE {_pct(cs['mape'])} over "
            f"{int(cs['rows'])} runs; worst row {_worst(ctrl)}; mean signed error {_pct(cs['bias'], True)}.")


def _bands_section(ev: Evaluation) -> list[str]:
    t = ev.table
    dims = {d["name"]: d for d in t["dimensions"]}
    lines = [
        "## Error bands (80%, leave-one-source-out)",
        "",
        "Each row's residual is log(measured / predicted) per-GPU throughput (a step-time or GPU-hours row",
        "inverted), from its LOSO prediction. The regime is the exposed-communication share",
        f"(`Result.network_wait_fraction`, bins {', '.join(dims['comm']['labels'])}), the scale (GPUs, bins",
        f"{', '.join(dims['scale']['labels'])}) and the framework (the scenario's `training.framework`, `auto` when",
        f"it names none). A cell gets a band with at least {t['min_rows']} rows from at least {t['min_sources']}",
        "sources; its band is [p10, p90] of the cell's residuals (Weibull plotting positions: an 80% prediction",
        "interval for one more row); a regime takes the band of its cell at the first level that has one:",
        f"{' -> '.join('(' + ', '.join(level) + ')' if level else 'pooled' for level in t['levels'])}.",
        "Measured per-GPU throughput lies in predicted x [p10, p90]; step time, time-to-train and cost in",
        "predicted / [p90, p10]. The table fitted on every row is engine/performance/data/error_bands.json",
        "(written by `make validation`; its \"about\" states the lookup, engine.validation.bands.band_for is the",
        "reference implementation).",
        "",
        "| cell | rows | sources | p10 | p90 |",
        "|---|---|---|---|---|",
    ]
    for e in t["bands"]:
        cell = ", ".join(f"{k} {v}" for k, v in e["cell"].items()) or "pooled (every row)"
        lines.append(f"| {cell} | {e['rows']} | {e['sources']} | {e['p10']:.3f} | {e['p90']:.3f} |")
    lines += [
        "",
        "Coverage: the share of rows whose measured value lies inside the band fitted WITHOUT the row's source",
        "(target 70-90% for an 80% band):",
        "",
        "| set | rows | inside | coverage |",
        "|---|---|---|---|",
    ]
    for key, name in [(s.run_set.key, s.run_set.title) for s in ev.sets] + [(None, "All sets")]:
        res = ev.residuals if key is None else ev.residuals_of_set(key)
        hits = sum(1 for r in res if r.run_id in ev.loso_band and inside(r, ev.loso_band[r.run_id]))
        lines.append(f"| {name} | {len(res)} | {hits} | {_pct(hits / len(res) if res else 0.0)} |")
    lines.append("")
    return lines


SHARES_SHOWN = 3  # terms named per scaling step


def _grown_shares(changes: dict[str, float]) -> str:
    """The terms whose share of the step grew most (at most SHARES_SHOWN, each by 0.1 point or more)."""
    grown = sorted(((v, k) for k, v in changes.items() if v >= 0.05), reverse=True)[:SHARES_SHOWN]
    return ", ".join(f"{k} {v:+.1f}" for v, k in grown) or "none"


def _scaling_section(ev: Evaluation, plot: Path | None) -> list[str]:
    lines = [
        "## Scaling series",
        "",
        "Rows where one source measured the same model (same scenario less its size: GPUs, parallel degrees,",
        "global and micro batch) at several cluster sizes. Change of per-GPU throughput from the smallest size,",
        "measured and predicted (LOSO); gap = predicted - measured in points: **positive means the engine",
        "loses less per GPU than the run did, i.e. it under-charges scale.** Measured per-GPU throughput is the",
        "predicted one times the row's measured / predicted ratio, so rows measuring different quantities compare.",
        "",
        "The last column says where the predicted loss went: the terms of the predicted step (`breakdown_s`) whose",
        "share of the step grew most from the smaller size to the larger, in points of the step.",
        "",
        "| series (model, GPU, source) | from | to | measured change | predicted change | gap (points) | "
        "predicted step shares that grew |",
        "|---|---|---|---|---|---|---|",
    ]
    gaps = []
    for s in ev.series:
        for p in s.points:
            gaps.append(p.gap_points)
            lines.append(f"| {s.name}, {s.gpu}, {s.source} | {s.base_gpus} ({s.base_run}) | {p.gpus} ({p.run_id}) | "
                         f"{p.measured_change * 100:+.1f}% | {p.predicted_change * 100:+.1f}% | "
                         f"{p.gap_points:+.1f} | {_grown_shares(p.share_changes)} |")
    if gaps:
        lines += [
            "",
            f"**{len(gaps)} size steps in {len(ev.series)} series: mean gap {sum(gaps) / len(gaps):+.1f} points; "
            f"{sum(1 for g in gaps if g > 0)} of {len(gaps)} positive (scale under-charged), largest "
            f"{max(gaps):+.1f}, smallest {min(gaps):+.1f}; {sum(1 for g in gaps if abs(g) <= SCALING_TARGET_POINTS)} "
            f"of {len(gaps)} within {SCALING_TARGET_POINTS:g} points (the target: all).**",
        ]
        diff = ev.table.get("differences") or {}
        if diff:
            lines += [
                "",
                f"**Error on differences:** 80% of these steps' predicted changes are within a factor "
                f"{diff['ratio']:.3f} (|log| {diff['abs_log_error']:.3f}) of the measured change. A comparison "
                "(API `beyond_model_error`, the compare page) calls two scenarios' throughput, step time, "
                "time-to-train or $/run different beyond the model's error only when they differ by more than "
                "that (error_bands.json `differences`).",
            ]
    if plot is not None:
        rel = plot.relative_to(REPO_ROOT / "docs") if plot.is_relative_to(REPO_ROOT / "docs") else plot
        lines += ["", f"![measured vs predicted per-GPU throughput change per series]({rel.as_posix()})"]
    else:
        lines += ["", "(`make validation` draws docs/img/validation_scaling.png of this table when matplotlib is",
                  "installed; it was not in this run.)"]
    lines.append("")
    return lines


def render_markdown(ev: Evaluation, plot: Path | None = None) -> str:
    """The validation report. ``plot``: the scaling figure written in this run, if any."""
    lines = [
        "# Validation against published runs",
        "",
        "Generated by `python manage.py validation_report` (`make validation`) from `engine/validation/data/`; do",
        "not edit by hand. Every row is predicted with the same constants (one set per GPU family, see",
        "docs/performance-model.md); settings a source does not give are `auto` and resolved by the search",
        "(fastest layout that fits). The compared quantity is the one the source measured.",
        "",
        "Each set is reported in-sample and leave-one-source-out (LOSO: every constant derived from any row",
        "refit without the rows of the predicted row's source; a source is one publication, the arXiv",
        "identifier or the vendor page a row cites). No figure leaves a row out. MAPE and the worst row are in",
        "each row's own quantity; bias is the mean of predicted / measured per-GPU throughput - 1 (positive:",
        "predicted faster than the run went).",
        "",
        f"The same figures, as data, are in {SUMMARY_PATH.relative_to(REPO_ROOT).as_posix()}: the portal's",
        "Accuracy page and `GET /api/v1/accuracy/` show them with the engine version that produced them.",
        "",
    ]
    if not ev.refit:
        lines += [
            "**LOSO equals in-sample: no engine constant has a refit hook (engine/validation/registry.py), so",
            f"nothing is refit without a source's rows. {len(ev.constants)} constants were set by hand from",
            "end-to-end rows (section \"Constants grounded on end-to-end rows\"): their sources' errors are",
            "calibration errors, which this LOSO cannot remove.**",
            "",
        ]
    lines += [*_overview(ev), ""]
    lines += _constants_section(ev)
    for s in ev.sets:
        lines += _set_section(ev, s)
    lines += _bands_section(ev)
    lines += _scaling_section(ev, plot)
    return "\n".join(lines).rstrip("\n") + "\n"
