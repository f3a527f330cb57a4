"""Shared scenario builders for the engine tests (plain dicts, as users write them)."""

from __future__ import annotations

import copy
from typing import Any

GPT_22B: dict[str, Any] = {
    "name": "GPT-22B", "layers": 48, "hidden": 6144, "heads": 64, "kv_heads": 64, "ffn_hidden": 24576,
    "gated_ffn": False, "vocab": 51200, "seq_len": 2048,
}
LLAMA_7B: dict[str, Any] = {
    "name": "Llama-2-7B", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "gated_ffn": True,
    "vocab": 32000, "seq_len": 4096,
}


def scenario(model: dict[str, Any] | None = None, training: dict[str, Any] | None = None,
             parallelism: Any = None, cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": copy.deepcopy(model or GPT_22B),
        "training": {"global_batch": 64, "micro_batch": 1, "precision": "bf16", "recompute": "selective",
                     "tokens": 1e11, "zero": 1},
        "parallelism": {"tp": 8, "pp": 2, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True},
        "cluster": {"gpu": "H100-SXM", "gpus": 64},
    }
    if training:
        doc["training"].update(training)
    if parallelism is not None:
        doc["parallelism"] = parallelism
    if cluster:
        doc["cluster"].update(cluster)
    return doc


def dp_heavy(**cluster: Any) -> dict[str, Any]:
    """A large data-parallel H100 job (7B, 1,024 GPUs, one sequence per GPU per step)."""
    return scenario(
        model=LLAMA_7B,
        training={"global_batch": 1024, "micro_batch": 1, "recompute": "none", "zero": 1, "tokens": 2e12},
        parallelism={"tp": 1, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": False},
        cluster={"gpus": 1024, **cluster},
    )


def report_rows(rows: Any) -> str:
    """One line per validation row (measured vs predicted), for assertion messages."""
    return "\n".join(f"{r.run_id}: {r.metric} measured {r.measured:.4g} predicted {r.predicted:.4g} "
                     f"({r.error * 100:+.1f}%)" for r in rows)
