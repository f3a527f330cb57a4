"""The scenario builder's workload presets as form values (the presets themselves: planning.presets)."""

from __future__ import annotations

from typing import Any

from planning.presets import DEFAULT_PRESET, PRESETS  # noqa: F401  (re-exported for the builder)

#: builder field -> model.moe key (the one definition; portal.forms.builder_sections reads it)
MOE_PRESET_FIELDS = {
    "moe_experts": "experts", "moe_top_k": "top_k", "moe_expert_ffn": "expert_ffn_hidden",
    "moe_shared_experts": "shared_experts", "moe_dense_layers": "dense_layers", "moe_dense_ffn": "dense_ffn_hidden",
}
#: builder field -> model.mla key (multi-head latent attention; portal.forms.builder_sections reads it)
MLA_PRESET_FIELDS = {
    "mla_kv_lora_rank": "kv_lora_rank", "mla_q_lora_rank": "q_lora_rank", "mla_qk_nope_head_dim": "qk_nope_head_dim",
    "mla_qk_rope_head_dim": "qk_rope_head_dim", "mla_v_head_dim": "v_head_dim",
}

#: the manual parallelism inputs a preset with stated degrees fills (those it does not state are emptied)
PRESET_DEGREES = ("tp", "pp", "vpp", "cp", "ep", "etp")


def preset_choices() -> list[tuple[str, str]]:
    return [(key, p["label"]) for key, p in PRESETS.items()] + [("custom", "Custom model…")]


def preset_form_fields(key: str) -> dict[str, Any]:
    """The builder form values a preset sets (field name -> value)."""
    p = PRESETS[key]
    m, t = p["model"], p["training"]
    moe = m.get("moe") or {}
    mla = m.get("mla") or {}
    par = p.get("parallelism") or {}
    return {
        "model_name": m["name"], "layers": m["layers"], "hidden": m["hidden"], "heads": m["heads"],
        "kv_heads": m["kv_heads"], "ffn_hidden": m["ffn_hidden"], "gated_ffn": m["gated_ffn"],
        "vocab": m["vocab"], "seq_len": m["seq_len"], "global_batch": t["global_batch"],
        # the block form and the attention window a preset does not state are cleared with it
        "parallel_block": bool(m.get("parallel_block", False)),
        "attention_window": m.get("attention_window", ""),
        "global_attention_every": m.get("global_attention_every", ""),
        "mtp_layers": m.get("mtp_layers", ""),
        "tokens_b": _tidy(t["tokens"] / 1e9),
        # a dense preset clears the MoE inputs ("" empties the field in the browser)
        **{field: moe.get(key, "") for field, key in MOE_PRESET_FIELDS.items()},
        # and a standard-attention preset the multi-head latent attention inputs
        **{field: mla.get(key, "") for field, key in MLA_PRESET_FIELDS.items()},
        # a preset that states its degrees sets them (manual mode); the others leave them to the search
        "par_mode": "manual" if par else "auto",
        **({name: par.get(name, "") for name in PRESET_DEGREES} if par else {}),
    }


def _tidy(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


def presets_for_js() -> dict[str, Any]:
    return {key: {"label": p["label"], "fields": preset_form_fields(key)} for key, p in PRESETS.items()}
