"""docs/img/validation_scaling.png: measured against predicted change of per-GPU throughput per scaling
series. matplotlib is optional at run time (a dev dependency, pyproject.toml): without it nothing is drawn."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path

from engine.validation.scaling import ScalingSeries


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def write_scaling_plot(series: Sequence[ScalingSeries], path: Path | str) -> Path | None:
    """Draw the series (one marker per larger size, the diagonal = exact) to ``path``; None when matplotlib
    is not installed or there is no series."""
    if not series or not matplotlib_available():
        return None
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")
    fig, ax = plt.subplots(figsize=(7.5, 6.0), dpi=120)
    values = [0.0]
    for s in series:
        xs = [p.measured_change * 100.0 for p in s.points]
        ys = [p.predicted_change * 100.0 for p in s.points]
        values += xs + ys
        label = f"{s.name} ({s.gpu}), {s.base_gpus} -> " + ", ".join(str(p.gpus) for p in s.points)
        ax.plot([0.0, *xs], [0.0, *ys], marker="o", label=label)
    lo, hi = min(values) - 3.0, max(values) + 3.0
    ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", linewidth=1, label="predicted = measured")
    ax.fill_between([lo, hi], [lo, hi], [hi, hi], color="tab:red", alpha=0.06)
    ax.text(lo + 1.0, hi - 2.0, "above the diagonal: scale under-charged", fontsize=8, va="top")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured change of per-GPU throughput from the smallest size (%)")
    ax.set_ylabel("predicted change (%)")
    ax.set_title("Scaling series: measured vs predicted (docs/validation.md)")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, linewidth=0.3)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
