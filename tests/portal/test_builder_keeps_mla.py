"""The builder has no inputs for multi-head latent attention (model.mla): an edit keeps it while the head layout
(hidden, heads) stays, and drops it with a new one (builder_sections.model_section)."""

from __future__ import annotations

from typing import Any

from portal.forms.builder_sections import model_section

MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
BASE = {"name": "DeepSeek-V3", "layers": 61, "hidden": 7168, "heads": 128, "kv_heads": 128, "ffn_hidden": 18432,
        "gated_ffn": True, "vocab": 129280, "seq_len": 4096, "mla": MLA}


def _form(**changes: Any) -> dict[str, Any]:
    d = {"model_name": "DeepSeek-V3", "layers": 61, "hidden": 7168, "heads": 128, "kv_heads": 128,
         "ffn_hidden": 18432, "gated_ffn": True, "vocab": 129280, "seq_len": 4096}
    d.update(changes)
    return d


def test_edit_keeps_mla_while_the_heads_stay() -> None:
    model = model_section(_form(layers=30, seq_len=8192), BASE)
    assert model["mla"] == MLA
    model["mla"]["kv_lora_rank"] = 1  # a copy: the stored section is not aliased
    assert BASE["mla"]["kv_lora_rank"] == 512


def test_new_head_layout_drops_mla() -> None:
    assert "mla" not in model_section(_form(heads=64), BASE)
    assert "mla" not in model_section(_form(hidden=4096), BASE)
