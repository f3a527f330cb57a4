"""Workload presets offered by the scenario builder.

Architecture figures are the public model cards of each family; token counts are the published training
budgets (rounded). These only pre-fill the form: every value is still validated by the engine's scenario
parser when the scenario is saved.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "llama3-8b": {
        "label": "Llama 3 8B",
        "model": {"name": "Llama-3-8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                  "ffn_hidden": 14336, "gated_ffn": True, "vocab": 128256, "seq_len": 8192},
        "training": {"global_batch": 1024, "tokens": 15e12},
    },
    "llama3-70b": {
        "label": "Llama 3 70B",
        "model": {"name": "Llama-3-70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
                  "ffn_hidden": 28672, "gated_ffn": True, "vocab": 128256, "seq_len": 8192},
        "training": {"global_batch": 2048, "tokens": 15e12},
    },
    "llama3-405b": {
        "label": "Llama 3.1 405B",
        "model": {"name": "Llama-3.1-405B", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8,
                  "ffn_hidden": 53248, "gated_ffn": True, "vocab": 128256, "seq_len": 8192},
        "training": {"global_batch": 2048, "tokens": 15.6e12},
    },
    "gpt3-175b": {
        "label": "GPT-3 175B",
        "model": {"name": "GPT-3-175B", "layers": 96, "hidden": 12288, "heads": 96, "kv_heads": 96,
                  "ffn_hidden": 49152, "gated_ffn": False, "vocab": 51200, "seq_len": 2048},
        "training": {"global_batch": 1536, "tokens": 300e9},
    },
    "mistral-7b": {
        "label": "Mistral 7B",
        "model": {"name": "Mistral-7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                  "ffn_hidden": 14336, "gated_ffn": True, "vocab": 32000, "seq_len": 4096},
        "training": {"global_batch": 1024, "tokens": 8e12},
    },
}

DEFAULT_PRESET = "llama3-70b"


def preset_choices() -> list[tuple[str, str]]:
    return [(key, p["label"]) for key, p in PRESETS.items()] + [("custom", "Custom model…")]


def preset_form_fields(key: str) -> dict[str, Any]:
    """The builder form values a preset sets (field name -> value)."""
    p = PRESETS[key]
    m, t = p["model"], p["training"]
    return {
        "model_name": m["name"], "layers": m["layers"], "hidden": m["hidden"], "heads": m["heads"],
        "kv_heads": m["kv_heads"], "ffn_hidden": m["ffn_hidden"], "gated_ffn": m["gated_ffn"],
        "vocab": m["vocab"], "seq_len": m["seq_len"], "global_batch": t["global_batch"],
        "tokens_b": _tidy(t["tokens"] / 1e9),
    }


def _tidy(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


def presets_for_js() -> dict[str, Any]:
    return {key: {"label": p["label"], "fields": preset_form_fields(key)} for key, p in PRESETS.items()}
