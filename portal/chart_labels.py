"""Short run labels for charts (issue #24): what tells the runs of a comparison apart, in words.

A sweep's runs differ in the axes it swept; a hand-picked comparison's runs differ in their cluster settings.
Each run's label names only what differs between the runs, in the order a planner says it and in short human
words — ``400G RoCE 2:1``, ``H100-SXM 1,024 GPUs`` — never the raw override string
(``nic_gbps=200, fabric=infiniband, oversubscription=1.0``). The baseline says so (``400G IB 1:1 baseline``);
runs that nothing tells apart are named by their id (``#12 baseline``). A label is also given as its words, one
per line of a chart's tick, so a dozen labels fit side by side without rotation or skipping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simulations.metrics import dig
from simulations.results import result_fits

#: the cluster settings that tell runs apart, in the order a label names them
AXIS_ORDER = ("gpu", "gpus", "nic_gbps", "fabric", "topology", "routing", "placement", "oversubscription")
FABRIC_WORDS = {"infiniband": "IB", "roce": "RoCE"}
TOPOLOGY_WORDS = {"fat-tree": "fat-tree", "rail-optimized": "rail-opt", "multi-plane": "multi-plane"}
ROUTING_WORDS = {"ecmp": "ECMP", "ecmp-qp": "ECMP-QP", "adaptive": "adaptive", "pinned": "pinned"}
BASELINE_WORD = "baseline"
NOFIT_WORD = "no fit"
#: prefixes an override path may carry; the label speaks of the setting (``cluster.nic_gbps`` is ``nic_gbps``)
_PREFIXES = ("cluster.", "params.")


def _key(path: str) -> str:
    for prefix in _PREFIXES:
        if path.startswith(prefix):
            return path.removeprefix(prefix)
    return path


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except (TypeError, ValueError):
        return None


def _plain(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:,.4g}"


def axis_words(key: str, value: Any) -> str:
    """One setting in short words: ``nic_gbps`` 400 → ``400G``, ``fabric`` roce → ``RoCE``, ``oversubscription``
    2 → ``2:1``, ``gpus`` 1024 → ``1,024 GPUs``; any other setting: its name's last word and its value
    (``training.global_batch`` 1024 → ``batch 1,024``)."""
    if value is None:
        return "default" if key == "routing" else ""
    num = _number(value)
    if key == "nic_gbps" and num is not None:
        return f"{_plain(num)}G"
    if key == "oversubscription" and num is not None:
        return f"{num:g}:1"
    if key == "gpus" and num is not None:
        return f"{_plain(num)} GPUs"
    if key == "fabric":
        return FABRIC_WORDS.get(str(value), str(value))
    if key == "topology":
        return TOPOLOGY_WORDS.get(str(value), str(value))
    if key == "routing":
        return ROUTING_WORDS.get(str(value), str(value))
    if key in ("gpu", "placement"):
        return str(value)
    name = key.rsplit(".", 1)[-1].split("_")[-1]
    shown = _plain(num) if num is not None else str(value)
    return f"{name} {shown}"


def run_settings(run: Any) -> dict[str, Any]:
    """What a run was set to: its cluster's headline settings, then every sweep override over them."""
    snap = run.input_snapshot if isinstance(getattr(run, "input_snapshot", None), Mapping) else {}
    cluster = dig(snap, "document.cluster") or {}
    settings: dict[str, Any] = {k: cluster.get(k) for k in AXIS_ORDER if k in cluster}
    for path, value in (snap.get("overrides") or {}).items():
        settings[_key(str(path))] = value
    return settings


def _same(value: Any) -> Any:
    """A comparable form of a setting (400 and 400.0 and "400" are one value)."""
    num = _number(value)
    return num if num is not None else repr(value)


def varied_axes(settings: Sequence[Mapping[str, Any]]) -> list[str]:
    """The settings that differ between the runs: the cluster's in :data:`AXIS_ORDER`, then the others in order."""
    keys = [k for k in AXIS_ORDER if any(k in s for s in settings)]
    keys += [k for s in settings for k in s if k not in keys]
    keys = list(dict.fromkeys(keys))
    return [k for k in keys if len({_same(s.get(k)) for s in settings}) > 1]


def label_parts(runs: Sequence[Any], baseline: Any = None) -> dict[int, list[str]]:
    """Each run's short label as words (one per tick line), keyed by run id."""
    settings = [run_settings(r) for r in runs]
    axes = varied_axes(settings)
    parts: dict[int, list[str]] = {}
    for run, s in zip(runs, settings, strict=True):
        words = [w for w in (axis_words(k, s.get(k)) for k in axes) if w]
        parts[run.pk] = words
    # runs that the varied settings do not tell apart (or nothing varied): their id tells them apart
    seen: dict[tuple[str, ...], int] = {}
    for words in parts.values():
        seen[tuple(words)] = seen.get(tuple(words), 0) + 1
    for run in runs:
        words = parts[run.pk]
        if not words or seen[tuple(words)] > 1:
            parts[run.pk] = [f"#{run.pk}", *words]
        if baseline is not None and run.pk == baseline.pk:
            parts[run.pk].append(BASELINE_WORD)
        if result_fits(getattr(run, "result", None)) is False:
            parts[run.pk].append(NOFIT_WORD)
    return parts


def short_labels(runs: Sequence[Any], baseline: Any = None) -> dict[int, str]:
    """Each run's short label (``400G RoCE 2:1``, ``#12 baseline``), keyed by run id."""
    return {pk: " ".join(words) for pk, words in label_parts(runs, baseline).items()}
