"""The widths of one layer's attention, per token: what its projections multiply, what the attention core reads
and what the backward pass keeps. One definition for standard multi-head / grouped-query attention and for
multi-head latent attention (MLA: DeepSeek-V2 arXiv 2405.04434 Sec. 2.1, DeepSeek-V3 arXiv 2412.19437 Sec. 2.1).

Standard attention (a heads of width d, g KV heads): Q and the attention output are a d wide, K and V g d each;
the projections are h x (a d + 2 g d) and a d x h, all split by tensor parallelism.

MLA (released-config names): the hidden state h goes down to a query latent of q_lora_rank (r_q) and a key/value
latent of kv_lora_rank (r_kv) plus one rotary key of qk_rope_head_dim (d_r) shared by every head; the latents go
up to a heads of qk_nope_head_dim (d_n) + d_r for queries, d_n for keys (with the shared rotary part appended)
and v_head_dim (d_v) for values. Megatron-Core keeps the down-projections whole on every TP rank (duplicated
linear layers) and splits the up-projections and the output projection by head. The backward pass keeps the
down-projection outputs (the latent norms' inputs) and the normalised latents (the up-projections' inputs);
recomputing the up-projections (Megatron-Core --recompute-modules mla_up_proj; DeepSeek-V3 Sec. 3.2.3) drops
Q, K and V and keeps the latents. Widths are elements, not split by any parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.schema.types import ModelSpec

# K and V: two tensors per KV head (standard attention)
KV_TENSORS = 2.0


@dataclass(frozen=True)
class AttentionWidths:
    """Per-token widths of one attention layer [elements] and its projections' multiply-adds [MAC per token]."""

    q: float  # Q: heads x score width (a d; MLA a (d_n + d_r))
    k_v: float  # K and V together (2 g d; MLA a (d_n + d_r) + a d_v): what the core reads, what ring CP passes
    o: float  # the attention output, the output projection's input (a d; MLA a d_v)
    core: float  # heads x (score width + value width) / 2: the core's two GEMMs are 2 x core MACs per key
    head_core: float  # one head's (score width + value width) / 2 (the unfused path's GEMM width)
    kv_split_heads: float  # heads K and V are split over by TP (g; MLA every head has its own K and V: a)
    sharded_macs: float  # projection MACs per token split by TP (by head)
    replicated_macs: float  # projection MACs per token on every TP rank (MLA down-projections; 0 otherwise)
    up_proj_out_elems: float  # per TP-split head: q + k_v (MLA: what mla_up_proj drops); 0 otherwise
    up_proj_in_widths: tuple[tuple[float, float], ...]  # MLA up-projections as (input width, output width) pairs, whole
    latent_elems: float  # MLA latents kept per token: down outputs (r_q + r_kv + d_r) + normalised (r_q + r_kv)
    latent_norm_elems: float  # of which the normalised latents (dropped by layernorm recomputation)
    down_width: float  # MLA down-projection output width r_q + r_kv + d_r (0 otherwise)

    @property
    def mla(self) -> bool:
        return self.down_width > 0.0


def standard_widths(hidden: float, heads: float, kv_heads: float, head_dim: float) -> AttentionWidths:
    """Multi-head / grouped-query attention: Q and output a d, K and V g d each, every projection split by TP."""
    q = heads * head_dim
    k_v = KV_TENSORS * kv_heads * head_dim
    return AttentionWidths(q=q, k_v=k_v, o=q, core=q, head_core=head_dim, kv_split_heads=kv_heads,
                           sharded_macs=hidden * (q + k_v) + q * hidden, replicated_macs=0.0, up_proj_out_elems=0.0,
                           up_proj_in_widths=(), latent_elems=0.0, latent_norm_elems=0.0,
                           down_width=0.0)


def mla_widths(hidden: float, heads: float, q_lora_rank: float, kv_lora_rank: float, nope: float, rope: float,
               v_dim: float) -> AttentionWidths:
    """Multi-head latent attention (module doc). Down: h x (r_q + r_kv + d_r), replicated over TP; up: r_q x
    a (d_n + d_r) (h x a (d_n + d_r) without a query latent, then not an up-projection of a latent but still split by
    head) and r_kv x a (d_n + d_v); output a d_v x h."""
    q = heads * (nope + rope)
    kv_up_out = heads * (nope + v_dim)  # K's non-rotary part and V; the rotary key is the down-projection's
    o = heads * v_dim
    k_v = q + o  # K is as wide as Q (its rotary part shared), V is a d_v
    down = q_lora_rank + kv_lora_rank + rope
    q_in = q_lora_rank if q_lora_rank > 0 else hidden
    ups = ((q_in, q), (kv_lora_rank, kv_up_out))
    latents = q_lora_rank + kv_lora_rank
    return AttentionWidths(
        q=q, k_v=k_v, o=o, core=(q + o) / 2.0, head_core=(nope + rope + v_dim) / 2.0, kv_split_heads=heads,
        sharded_macs=sum(i * w for i, w in ups) + o * hidden, replicated_macs=hidden * down,
        up_proj_out_elems=q + k_v, up_proj_in_widths=ups, latent_elems=down + latents,
        latent_norm_elems=latents, down_width=down)


def attention_widths(m: ModelSpec) -> AttentionWidths:
    """The model's attention widths: MLA where ``model.mla`` is given, else standard (heads, kv_heads, head_dim)."""
    if m.mla is None:
        return standard_widths(float(m.hidden), float(m.heads), float(m.kv_heads), float(m.dim_head))
    a = m.mla
    return mla_widths(float(m.hidden), float(m.heads), float(a.q_lora_rank), float(a.kv_lora_rank),
                      float(a.qk_nope_head_dim), float(a.qk_rope_head_dim), float(a.v_head_dim))
