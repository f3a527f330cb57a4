"""Workload presets: published model shapes and training budgets, one definition for the portal's scenario
builder and the demo data.

Architecture figures are the public model cards of each family; token counts are the published training
budgets (rounded) unless a comment says otherwise. They only pre-fill: every value is still validated by the
engine's scenario parser when a scenario is saved.
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
    # Mixture of experts. DeepSeekMoE 16B: Dai et al. 2024 (arXiv 2401.06066) Sec. 5.1 and the released config:
    # 28 layers, hidden 2048, 16 heads, first layer dense (SwiGLU 10944), then 2 shared + 64 routed experts of
    # 1408, top-6; 2T tokens in batches of 4.5K sequences of 4K tokens.
    "deepseekmoe-16b": {
        "label": "DeepSeekMoE 16B (MoE)",
        "model": {"name": "DeepSeekMoE-16B", "layers": 28, "hidden": 2048, "heads": 16, "kv_heads": 16,
                  "ffn_hidden": 10944, "gated_ffn": True, "vocab": 102400, "seq_len": 4096,
                  "moe": {"experts": 64, "top_k": 6, "expert_ffn_hidden": 1408, "shared_experts": 2,
                          "dense_layers": 1, "dense_ffn_hidden": 10944}},
        "training": {"global_batch": 4608, "tokens": 2e12},
    },
    # Mixtral 8x7B: Jiang et al. 2024 (arXiv 2401.04088) Table 1: 32 layers, dim 4096, 32 heads, 8 KV heads,
    # hidden 14336, vocab 32000, 8 experts, top-2. Training tokens and batch are not published: 8T tokens and
    # 1,024 sequences are planning figures (the Mistral 7B preset's), sequence 4,096.
    "mixtral-8x7b": {
        "label": "Mixtral 8x7B (MoE)",
        "model": {"name": "Mixtral-8x7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                  "ffn_hidden": 14336, "gated_ffn": True, "vocab": 32000, "seq_len": 4096,
                  "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 14336}},
        "training": {"global_batch": 1024, "tokens": 8e12},
    },
    # DeepSeek-V3 671B: DeepSeek-AI 2024 (arXiv 2412.19437) Sec. 4.2 and the released config.json: 61 layers,
    # hidden 7168, 128 heads with multi-head latent attention (query latent 1536, KV latent 512, per-head
    # query/key 128 + rotary 64, value 128), first 3 layers dense (SwiGLU 18432), then 1 shared + 256 routed
    # experts of 2048, top-8; vocab 129,280; 14.8T tokens, the batch ramped up to 15,360 sequences of 4K tokens.
    # One multi-token-prediction module (Sec. 2.2 and 4.2: depth D = 1; the released checkpoint's layer 61, an MoE
    # layer). Parallelism: the paper's own (Sec. 3.2.1: "16-way Pipeline Parallelism (PP), 64-way Expert
    # Parallelism (EP) spanning 8 nodes, and ZeRO-1 Data Parallelism (DP)", no tensor parallelism); with every
    # degree searched its layout space exceeds the search's limit.
    "deepseek-v3": {
        "label": "DeepSeek-V3 671B (MoE, MLA)",
        "model": {"name": "DeepSeek-V3", "layers": 61, "hidden": 7168, "heads": 128, "kv_heads": 128,
                  "ffn_hidden": 18432, "gated_ffn": True, "vocab": 129280, "seq_len": 4096,
                  "moe": {"experts": 256, "top_k": 8, "expert_ffn_hidden": 2048, "shared_experts": 1,
                          "dense_layers": 3, "dense_ffn_hidden": 18432},
                  "mla": {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                          "qk_rope_head_dim": 64, "v_head_dim": 128},
                  "mtp_layers": 1},
        "training": {"global_batch": 15360, "tokens": 14.8e12},
        "parallelism": {"tp": 1, "pp": 16, "cp": 1, "ep": 64},
    },
    "mistral-7b": {
        "label": "Mistral 7B",
        "model": {"name": "Mistral-7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                  "ffn_hidden": 14336, "gated_ffn": True, "vocab": 32000, "seq_len": 4096},
        "training": {"global_batch": 1024, "tokens": 8e12},
    },
}

DEFAULT_PRESET = "llama3-70b"
