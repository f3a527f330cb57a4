"""The scenario document's fields, declared once: path, type, bound, default, choices and a one-line help.

Everything that knows the document's shape derives from :data:`FIELDS`:

* the parser (:mod:`engine.document.parse`, :mod:`.costs_section`, :mod:`.ranges`): the keys each section
  allows and requires, the static defaults, each enum's accepted values and whether ``"auto"`` is accepted;
* the writer (:func:`engine.schema.types.scenario_to_dict`): which keys the canonical document writes, and when
  (``write``);
* the API (``planning.api.serializers``): the JSON Schema of each section (:mod:`.json_schema`);
* the portal's builder forms: choices, min/max and help;
* docs/scenario-format.md: its reference tables (:mod:`engine.document.reference`, checked by a test).

Numbers take their type and bound from the one bounds table (:mod:`.bounds`), enums their values and labels
from :mod:`.enums`. Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine.schema.bounds import Bound, bound_for
from engine.schema.enums import (
    DEFAULT_QPS,
    ActivationCache,
    Attention,
    ChoiceSet,
    CpCommType,
    Distribution,
    DpPlacement,
    ExpertKernel,
    Fabric,
    FacilityMode,
    Framework,
    LeafPlacement,
    MoeDispatcher,
    OptimizerMoments,
    Precision,
    RankAssignment,
    Recompute,
    RecomputeModule,
    Routing,
    TopologyKind,
)

AUTO = "auto"
# "choices": a list of distinct values of the field's enum (a set, written in the enum's order)
FieldKind = Literal["int", "number", "bool", "choice", "choices", "string", "key", "object"]
# how the canonical document (scenario_to_dict) writes a parsed field
ALWAYS = "always"  # always, as parsed
AUTO_OR_VALUE = "auto"  # the value, or "auto" when the engine decides (parsed as None)
IF_SET = "if_set"  # only when the parsed value is not ``unset`` (an optional setting left out stays left out)
IF_GIVEN = "if_given"  # only when the document gave it (the parsed spec's ``given`` flag)
IF_NOT_DEFAULT = "if_not_default"  # only when it differs from its default (``default_by``)
CUSTOM = "custom"  # written by the writer's own code (parallelism, nested sections, top-level extras)
# ranged inputs: any number under these sections may be written as {low, likely, high} (engine.document.ranges)
RANGED_SECTIONS = ("costs", "cluster", "training")
# a default routing mode for each fabric when cluster.routing is not given
DEFAULT_ROUTING: dict[str, str] = {Fabric.INFINIBAND: Routing.ADAPTIVE, Fabric.ROCE: Routing.ECMP}


#: what the reference writes for a cost number's default (engine.document.reference reads the figure itself)
FACILITY_DEFAULT = "the facility's"


class _Mandatory:
    def __repr__(self) -> str:
        return "MANDATORY"


MANDATORY: Any = _Mandatory()


@dataclass(frozen=True)
class Field:
    """One key of the scenario document."""

    path: str  # dotted: "cluster.fabric"; a top-level key has no dot
    kind: FieldKind
    help: str  # one line, for forms, the API description and the reference
    default: Any = None  # MANDATORY; a value; a mapping when ``default_by`` names the key it depends on; None: none
    default_text: str = ""  # the default in words when it is computed from other fields or the catalog
    choices: type[ChoiceSet] | None = None
    auto: bool = False  # "auto" accepted: the engine decides (search, or a default by context)
    listed: bool = False  # a list of allowed values accepted (the search tries only those)
    default_by: str = ""  # sibling key whose value picks the default from ``default`` (a mapping)
    write: str = ALWAYS
    unset: Any = None  # the parsed value meaning "not set" (write=IF_SET)
    given: str = ""  # attribute of the parsed spec saying the key was given (write=IF_GIVEN)
    more: str = ""  # more words for the reference (after the help)

    @property
    def key(self) -> str:
        return self.path.rpartition(".")[2]

    @property
    def section(self) -> str:
        """``model.moe`` for ``model.moe.experts``; ``""`` for a top-level key."""
        return self.path.rpartition(".")[0]

    @property
    def required(self) -> bool:
        return self.default is MANDATORY

    @property
    def bound(self) -> Bound | None:
        return bound_for(self.path) if self.kind in ("int", "number") else None

    @property
    def ranged(self) -> bool:
        return self.kind in ("int", "number") and self.path.split(".")[0] in RANGED_SECTIONS

    def default_for(self, values: Mapping[str, Any]) -> Any:
        """The default given the section's other (parsed) values: ``cluster.routing`` by ``fabric``."""
        if self.default_by:
            return self.default[values[self.default_by]]
        return None if self.required else self.default

    def default_words(self) -> str:
        """The default as the reference and the forms' help say it."""
        if self.default_text:
            return self.default_text
        if self.required:
            return "required"
        if self.default_by:
            return ", ".join(f"`{v}` for {self.default_by} `{k}`" for k, v in self.default.items())
        if self.default is None:
            return "none"
        if isinstance(self.default, bool):
            return "`true`" if self.default else "`false`"
        if self.default == "":
            return '`""`'
        if isinstance(self.default, str):
            return f'`"{self.default}"`' if self.default == AUTO else f"`{self.default}`"
        return f"`{self.default}`"


def _f(path: str, kind: FieldKind, help: str, **kw: Any) -> Field:
    return Field(path, kind, help, **kw)


_DEGREE: dict[str, Any] = {"kind": "int", "auto": True, "listed": True, "default": 1, "write": AUTO_OR_VALUE}

FIELDS: tuple[Field, ...] = (
    # ---- top level
    _f("name", "string", "Label of the scenario", default="", write=IF_SET, unset=""),
    _f("description", "string", "Free text about the scenario", default="", write=IF_SET, unset=""),
    _f("model", "object", "The model's architecture", default=MANDATORY, write=CUSTOM),
    _f("training", "object", "The training run: batch, precision, tokens, kernels", default=MANDATORY, write=CUSTOM),
    _f("parallelism", "object", 'Parallel degrees, or "auto" to search them all', default=MANDATORY, auto=True,
       write=CUSTOM),
    _f("cluster", "object", "The cluster and its fabric", default=MANDATORY, write=CUSTOM),
    _f("costs", "object", "Cost assumptions for the TCO model (and fabric settings that change what is built)",
       write=CUSTOM),
    _f("uncertainty", "object", "How the ranges are sampled by the Monte Carlo", write=CUSTOM),
    _f("calibration", "object", "A fleet's calibration profile (added by the platform; docs/calibration.md)",
       write=CUSTOM),
    _f("fabric_study", "object", "A fabric study pinned to the scenario (added by the platform; docs/flowsim.md)",
       write=CUSTOM),
    # ---- model
    _f("model.name", "string", "Label of the model", default="model"),
    _f("model.layers", "int", "Transformer layers", default=MANDATORY),
    _f("model.hidden", "int", "Model width h", default=MANDATORY),
    _f("model.heads", "int", "Attention (query) heads; must divide hidden unless head_dim is given",
       default=MANDATORY),
    _f("model.kv_heads", "int", "Key/value heads (GQA); must divide heads", default_text="`heads`"),
    _f("model.ffn_hidden", "int", "FFN inner width", default_text="`4 * hidden`"),
    _f("model.gated_ffn", "bool", "SwiGLU-style FFN with 3 weight matrices instead of 2", default=False),
    _f("model.vocab", "int", "Vocabulary size (input embedding and output layer are counted untied)",
       default=MANDATORY),
    _f("model.seq_len", "int", "Training sequence length", default=MANDATORY),
    _f("model.head_dim", "int", "Width of one head, for models whose heads x head_dim is not hidden",
       default_text="`hidden / heads`", write=IF_SET, unset=0,
       more="e.g. Gemma-style heads wider than hidden / heads; sets the Q/output projection and attention-core "
            "FLOPs (multi-head latent attention has its own widths: model.mla). Written to the canonical document "
            "only when it differs from the default"),
    _f("model.attention_window", "int", "Tokens each query attends to (sliding-window or chunked attention)",
       default_text="`seq_len` (full causal attention)", write=IF_SET, unset=0,
       more="e.g. Mistral 7B's 4,096-token sliding window: the attention core's FLOPs and fused-kernel time scale "
            "with min(window, seq_len) instead of seq_len, on every layer (docs/performance-model.md sections 1, "
            "2). Chunked attention (Llama 4's local layers) is costed as a sliding window of the chunk, up to 2x "
            "its kernel work; models that mix local and global layers set model.global_attention_every. A "
            "window of seq_len or more is full attention"),
    _f("model.global_attention_every", "int", "Every k-th layer attends to the whole sequence, the rest to the window",
       default_text="none (every layer windowed)", write=IF_SET, unset=0,
       more="with model.attention_window: floor(layers / k) layers (every k-th) use full causal attention, the "
            "others the window, e.g. Gemma 3's 5 local : 1 global (6), GPT-OSS's alternation (2), Llama 4's 3 "
            "chunked : 1 global (4). Attention FLOPs and fused-kernel time are the layers' mix (docs/"
            "performance-model.md sections 1, 2). 1 = every layer global (the window unused)"),
    _f("model.parallel_block", "bool", "Attention and FFN in parallel from one layernorm (GPT-J / PaLM block)",
       default=False, write=IF_SET, unset=False,
       more="z = x + Attn(LN(x)) + FFN(LN(x)) instead of the serial block (GPT-J, PaLM, Falcon, MegaScale): the "
            "same FLOPs, one layernorm and one residual add, half the layernorm activations kept, and one tensor-"
            "parallel output reduction per layer and pass instead of two (the branches are added first, as "
            "GPT-NeoX's gpt_j_residual does). Dense models only: refused with model.moe "
            "(docs/performance-model.md section 2)"),
    _f("model.mtp_layers", "int", "Multi-token-prediction modules after the last layer (DeepSeek-V3: 1)",
       default=0, write=IF_SET, unset=0,
       more="each a 2h -> h projection, one transformer layer of the last layer's kind and the output head again, "
            "on the last pipeline rank with a copy of the embedding (Megatron-Core --mtp-num-layers): FLOPs, the "
            "last rank's time, weights and memory (docs/performance-model.md sections 1, 2, 6)"),
    _f("model.moe", "object", "Mixture of experts (absent: a dense model)", write=CUSTOM),
    _f("model.moe.experts", "int", "Routed experts per MoE layer", default=MANDATORY),
    _f("model.moe.top_k", "int", "Experts each token is routed to (at most experts)", default=MANDATORY),
    _f("model.moe.expert_ffn_hidden", "int", "FFN inner width of one expert", default=MANDATORY),
    _f("model.moe.shared_experts", "int", "Shared experts every token goes through", default=0),
    _f("model.moe.dense_layers", "int", "First layers with a dense FFN instead of experts", default=0),
    _f("model.moe.dense_ffn_hidden", "int", "FFN inner width of the dense layers", default_text="`4 * hidden`"),
    _f("model.mla", "object", "Multi-head latent attention (absent: standard multi-head / grouped-query)",
       write=CUSTOM,
       more="DeepSeek-V2/V3 and Kimi K2 attention, keys as in their released configs: K and V come from one "
            "kv_lora_rank latent per token (plus a shared qk_rope_head_dim rotary key), queries from a "
            "q_lora_rank latent (0: projected directly from the hidden state); heads of qk_nope_head_dim + "
            "qk_rope_head_dim for scores and v_head_dim for values. The down-projections are replicated on every "
            "TP rank (Megatron-Core), the up-projections and the output projection split by head. Replaces "
            "kv_heads and head_dim (docs/performance-model.md section 1)"),
    _f("model.mla.kv_lora_rank", "int", "Width of the compressed key/value latent", default=MANDATORY),
    _f("model.mla.qk_nope_head_dim", "int", "Per-head query/key width without rotary position", default=MANDATORY),
    _f("model.mla.qk_rope_head_dim", "int", "Per-head query/key rotary width (the rotary key is shared)",
       default=MANDATORY),
    _f("model.mla.v_head_dim", "int", "Per-head value width", default=MANDATORY),
    _f("model.mla.q_lora_rank", "int", "Width of the compressed query latent (0: no query compression)", default=0),
    # ---- training
    _f("training.global_batch", "int", "Sequences per optimizer step", default=MANDATORY),
    _f("training.micro_batch", "int", "Sequences per micro-batch per data-parallel rank", default=AUTO, auto=True,
       write=AUTO_OR_VALUE),
    _f("training.precision", "choice", "GEMM precision (fp16 runs: use bf16, same peak)", default=Precision.BF16,
       choices=Precision,
       more="`mxfp8` and `nvfp4` need a Blackwell GPU (a GPU without the format is refused). `mxfp8`: every "
            "linear layer block-scaled fp8; `nvfp4`: NVIDIA's NVFP4 recipe (arXiv 2509.25149), 16% of the linear "
            "layers kept in bf16; the attention core and the output layer stay bf16 (docs/performance-model.md "
            "section 2)"),
    _f("training.recompute", "choice", "Activation recomputation", default=AUTO, auto=True, choices=Recompute,
       write=AUTO_OR_VALUE,
       more="`full`: keep only each layer's input, recompute the whole forward (about +30% time). `selective`: "
            "recompute everything except the GEMMs (layernorm and activation-function outputs, plus the attention "
            "core when `attention` is `unfused`; Korthikanti et al. 2022), about 1% time "
            "(docs/performance-model.md sections 2, 6)"),
    _f("training.recompute_layers", "int", "Layers of each pipeline chunk recomputed in full",
       default_text="all of them", write=IF_SET, unset=None,
       more="Partial full recomputation (Megatron-Core --recompute-granularity full --recompute-method block "
            "--recompute-num-layers): the first n layers of every pipeline chunk (virtual stage) keep only their "
            "input and recompute their forward; the others keep all their activations. Needs `recompute` full. "
            "Written to the canonical document only when set (docs/performance-model.md sections 2, 6)"),
    _f("training.recompute_modules", "choices", "What selective recomputation regenerates",
       choices=RecomputeModule, default_text="`layernorm`, `activation`, `core_attn`", write=IF_SET, unset=None,
       more="Applies where `recompute` is `selective` (or the search picks it); Megatron-Core --recompute-modules, "
            "torchtitan selective op checkpointing. `layernorm`: the two layernorm outputs; `activation`: the FFN "
            "activation-function output; `core_attn`: the attention scores (only unfused attention stores them); "
            "`mlp`: the whole FFN, its GEMMs recomputed too (dense and routed experts; tokens stay dispatched). "
            "Written to the canonical document only when set (docs/performance-model.md sections 2, 6)"),
    _f("training.activation_cache", "choice", "Number format of the cached FFN activations (GeLU / SwiGLU inputs)",
       default=ActivationCache.BF16, choices=ActivationCache, write=IF_SET,
       more="`fp8` keeps the FFN-in GEMM outputs (the SwiGLU or GeLU inputs) for the backward pass in fp8 with one "
            "scale per 1 x 128 tile, as DeepSeek-V3 did (arXiv 2412.19437 Sec. 3.3.3): half their bytes, plus a "
            "quantise pass forward and a dequantise pass backward. Needs `precision` fp8, mxfp8 or nvfp4. Written "
            "to the canonical document only when set (docs/performance-model.md section 6)"),
    _f("training.optimizer_moments", "choice", "Number format of Adam's first and second moments",
       default=OptimizerMoments.FP32, choices=OptimizerMoments, write=IF_SET,
       more="`bf16` stores m and v in bf16 (DeepSeek-V3 Sec. 3.3.3; Megatron-Core --use-precision-aware-optimizer "
            "with --exp-avg-dtype / --exp-avg-sq-dtype bf16): 8 instead of 12 bytes of optimizer state per "
            "parameter (fp32 master weights kept) and 22 instead of 30 bytes of HBM traffic per optimizer step. "
            "Written to the canonical document only when set (docs/performance-model.md section 6)"),
    _f("training.tokens", "number", "Tokens to train, for time_to_train_days and gpu_hours", default=MANDATORY),
    _f("training.zero", "int", "ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also weights",
       default=1, auto=True, write=AUTO_OR_VALUE),
    _f("training.shard_group", "int", "ZeRO shard group (HSDP): data x context parallel ranks each ZeRO shard spans",
       default=AUTO, auto=True, write=IF_SET, unset=None,
       more="Hybrid sharding (PyTorch HSDP, torchtitan dp_shard, DeepSpeed ZeRO++ hpZ, Megatron-FSDP): the ZeRO "
            "stage shards the model states over groups of this many consecutive data x context parallel ranks and "
            "replicates them across the groups; the gradients of each shard are all-reduced across the replicas "
            "once per step. A multiple of parallelism.cp that divides the data x context parallel ranks; `auto` = "
            "all of them (plain ZeRO / FSDP). Written to the canonical document only when set "
            "(docs/performance-model.md section 3a)"),
    _f("training.attention", "choice", "Attention kernel", default=AUTO, auto=True, choices=Attention,
       write=IF_SET,
       more="`flash` = FlashAttention-2 class, `native` = the GPU's own fused kernels (cuDNN fused attention, "
            "FlashAttention-3 on Hopper, -4 on Blackwell), `unfused` = scores in HBM; each runs at its measured rate "
            "(docs/performance-model.md s.2). `auto` = what the stack ran: Transformer Engine stacks (`nemo`; "
            "`megatron-core` from 2024-04) `native` on Hopper from 2023-12 and on Blackwell from 2025-02 (at "
            "training.framework_release); otherwise the GPU family's default: `unfused` on Ampere (the A100-era "
            "production stacks), `flash` on Hopper, `native` on Blackwell. Set `flash` for A100 runs that used "
            "FlashAttention (MPT, LLaMA). Written to the canonical document only when set"),
    _f("training.dropout", "bool", "Hidden dropout after attention and FFN (activation memory only)", default=AUTO,
       auto=True, write=IF_SET,
       more="Two 1-byte masks per token per layer (2h bytes). `auto` = off for gated-FFN (SwiGLU) models (Llama, "
            "Mistral, Qwen, DeepSeek), on for GPT-2/3-style models (Megatron, BLOOM, MT-NLG used 0.1); set `false` "
            "for dropout-free non-gated models (MPT, Nemotron-4). Written to the canonical document only when set"),
    _f("training.framework", "choice", "Training framework whose documented overlap defaults the model applies",
       default=AUTO, auto=True, choices=Framework, write=IF_SET,
       more="DP reduce-scatter / all-gather overlap, TP overlap, ZeRO-3 prefetch and bucket sizes; see "
            "docs/performance-model.md. Written to the canonical document only when set"),
    _f("training.framework_release", "string", "Month (YYYY-MM) of the framework release the run used",
       default_text="the current release", write=IF_SET, unset=None,
       more="Applies what the framework did then (docs/performance-model.md section 3b): DeepSpeed's ZeRO-3 "
            "gathered one parameter tensor at a time, synchronously, before 2022-01; Megatron-LM overlapped DP "
            "communication from 2023-09; NCCL had NVLS from 2023-03 and PAT from 2024-09. A layout the release "
            "cannot run (ZeRO-3 on Megatron-Core before 2024-11, or beside pipeline or expert parallelism before "
            "2025-02; vpp > 1 on DeepSpeed) is refused. From 2019-01 to the current month. Written to the canonical "
            "document only when set"),
    _f("training.expert_kernel", "choice", "Kernel class of the routed-expert (grouped) GEMMs of MoE layers",
       default=AUTO, auto=True, choices=ExpertKernel, write=IF_SET,
       more="`warp-mma` runs at 0.77 of the dense GEMM rate on Hopper and later. `auto` = `warp-mma` for bf16 on "
            "Hopper, `native` for fp8, on Blackwell and on Ampere. Dense models ignore it. Written to the "
            "canonical document only when set (docs/performance-model.md section 2)"),
    _f("training.moe_dispatcher", "choice", "MoE token dispatcher (Megatron-Core --moe-token-dispatcher-type)",
       default=AUTO, auto=True, choices=MoeDispatcher, write=IF_SET,
       more="`auto` = the named framework's default (`allgather` for `megatron-core`), else `alltoall`. With EP "
            "across nodes the all-gather traffic crosses the NICs, grows with EP and is never overlapped. Dense "
            "models ignore it. Written to the canonical document only when set (docs/performance-model.md "
            "section 3)"),
    _f("training.cp_comm_type", "choice", "How context parallelism moves K and V (--cp-comm-type)", write=IF_SET,
       choices=CpCommType, default=CpCommType.P2P, unset=CpCommType.P2P,
       more="`all-gather` puts the K/V all-gather and dK/dV reduce-scatter in the critical path (Llama 3); "
            "`p2p` hides the ring under the attention blocks; `a2a` (DeepSpeed-Ulysses) exchanges Q, K, V and the "
            "output for a share of the heads, exposed, and needs each TP rank's query and key/value heads "
            "divisible by parallelism.cp (docs/performance-model.md section 3)"),
    # ---- parallelism (the canonical order of the writer: tp, pp, cp, ep, vpp, sequence_parallel, dp)
    _f("parallelism.tp", help="Tensor-parallel degree (divides model.heads)", **_DEGREE),
    _f("parallelism.pp", help="Pipeline-parallel degree (at most model.layers)", **_DEGREE),
    _f("parallelism.cp", help="Context-parallel degree (divides model.seq_len)", **_DEGREE),
    _f("parallelism.ep", help="Expert-parallel degree (needs model.moe; divides the experts and dp * cp, or with "
                              "etp: etp * ep divides tp * cp * dp)", **_DEGREE),
    _f("parallelism.etp", "int", "Expert tensor-parallel degree (MoE parallel folding)", default=AUTO, auto=True,
       write=IF_SET, unset=None, default_text="`tp` (experts tensor-parallel like attention)",
       more="Megatron-Core's `--expert-tensor-parallel-size` (MoE Parallel Folding, arXiv 2504.14960): the MoE "
            "layers run expert-TP x EP x expert-DP x PP over the ranks that attention runs TP x CP x DP x PP, so "
            "EP folds over the attention's tp * cp * dp ranks: etp * ep divides tp * cp * dp (ep need not divide "
            "dp * cp). Needs model.moe; divides model.moe.expert_ffn_hidden. Never searched: `auto` = tp. "
            "Written to the canonical document only when set (docs/performance-model.md section 3)"),
    _f("parallelism.vpp", help="Virtual pipeline stages per rank (interleaving; pp * vpp at most model.layers)",
       more="Megatron-LM's interleaved schedule also needs micro-batches per step (global_batch / (dp * "
            "micro_batch)) divisible by pp, and pp > 2 before 2024-05; DeepSpeed has none (vpp 1). The search "
            "leaves out layouts the framework cannot run; a fixed vpp none can run is refused "
            "(docs/performance-model.md section 3b)",
       **_DEGREE),
    _f("parallelism.sequence_parallel", "bool", "Sequence parallelism inside tensor-parallel groups",
       default=AUTO, auto=True, default_text="on when tp > 1", write=AUTO_OR_VALUE),
    _f("parallelism.dp", "int", "Data-parallel degree", auto=True, write=IF_SET,
       default_text="`cluster.gpus / (tp * pp * cp)`"),
    _f("parallelism.dp_placement", "choice", "Where data parallelism sits in the rank order",
       default=AUTO, auto=True, choices=DpPlacement, write=IF_SET,
       more="`inner` = TP, CP, DP, PP from innermost (Megatron-Core's tp-cp-ep-dp-pp): DP groups stay inside "
            "pods, pipeline neighbours cross them; `outer` = TP, CP, PP, DP (Llama 3, arXiv 2407.21783 section "
            "3.3.2): DP groups span pods and pay the oversubscribed tier, pipeline neighbours stay close. `auto` = "
            "the named framework's default (`inner`), both searched when the framework is auto. Written to the "
            "canonical document only when set (docs/performance-model.md section 3)"),
    _f("parallelism.embedding_loss_in_split", "bool",
       "The embedding and the loss each take one layer's place in the pipeline split", default=False,
       write=IF_SET, unset=False,
       more="Megatron-Core's `--account-for-embedding-in-pipeline-split` and `--account-for-loss-in-pipeline-split` "
            "(2025-02): the layers split as if there were model.layers + 2, the first virtual stage of the first "
            "rank holding the embedding in place of a layer and the last one of the last rank the output layer "
            "and loss; Llama 3 (arXiv 2407.21783 section 3.3.2) removed one layer from its first and last stages "
            "so. pp * vpp may then reach model.layers + 2, and the model.layers + 2 places must split into whole stages "
            "and chunks, as Megatron-Core requires (docs/performance-model.md section 5)"),
    # ---- cluster (the writer's order)
    _f("cluster.gpu", "key", "GPU model (a catalog key)", default=MANDATORY),
    _f("cluster.gpus", "int", "GPUs in the job; a multiple of gpus_per_node (any count on rack-scale systems)",
       default=MANDATORY,
       more="HGX-style servers are bought whole, so the count is a multiple of gpus_per_node. A rack-scale system "
            "(GB200 / GB300 NVL72, catalog `node_sizes`) takes any count: ceil(gpus / gpus_per_rack) racks (72 "
            "unless `gpus_per_rack` says fewer), the last one partial (only its GPUs' NICs are cabled)"),
    _f("cluster.gpus_per_node", "int", "GPUs per node, that is per NVLink domain",
       default_text="the GPU's `default_gpus_per_node`: 8, or 72 for `GB200` / `GB300`",
       more="A rack-scale system (GB200 NVL72, GB300 NVL72) is one 72-GPU node (NVLink domain); GB200 / GB300 "
            "accept only 72 here (the catalog's `node_sizes`), and a job may use part of its last rack"),
    _f("cluster.gpus_per_rack", "int", "GPUs the job uses in each rack-scale NVLink domain (the rest are spares)",
       write=IF_SET, unset=None, default_text="all of them (`gpus_per_node`)",
       more="Rack-scale systems only (GB200 / GB300 NVL72, catalog `node_sizes`; refused on HGX servers), 1 to "
            "`gpus_per_node`. Jobs often use 64 of an NVL72's 72 GPUs: 8 spares per rack for failover, and 64 "
            "factors into power-of-two TP / EP / DP layouts. The layout's NVLink domain is then `gpus_per_rack`; "
            "the job takes ceil(gpus / gpus_per_rack) racks (the last one may be partial), each bought, powered "
            "and housed whole, spares included; only the used GPUs' NICs are cabled. Written to the canonical "
            "document only when set (docs/performance-model.md, rack-scale systems)"),
    _f("cluster.nics_per_node", "int", "Compute-fabric NICs per node", default_text="`gpus_per_node`"),
    _f("cluster.nic_gbps", "number", "Line rate per NIC (Gb/s)",
       default_text="the GPU's `default_nic_gbps` (A100 200, Hopper/B200 400, B300 800)"),
    _f("cluster.fabric", "choice", "Scale-out fabric", default=Fabric.INFINIBAND, choices=Fabric),
    _f("cluster.topology", "choice", "Scale-out topology", default=TopologyKind.FAT_TREE, choices=TopologyKind),
    _f("cluster.tiers", "int", "Switch tiers; an explicit count too small for the cluster is refused",
       default=AUTO, auto=True, default_text="the smallest tier count the chosen switch can build"),
    _f("cluster.oversubscription", "number", "Down:up ratio of the leaf switches (1.0 = non-blocking)",
       default=1.0, more="with `pod_gpus` < `gpus`, the ratio of the tier above the non-blocking pods instead"),
    _f("cluster.routing", "choice", "How traffic leaving a leaf switch picks its uplink", choices=Routing,
       default=DEFAULT_ROUTING, default_by="fabric",
       more="The switch's catalog entry lists what it supports (`specs.routing`): Quantum IB switches adaptive / "
            "pinned / ecmp (static subnet-manager routing), Spectrum-4 SN5600 all four, Tomahawk 5 ecmp / ecmp-qp "
            "/ pinned. Asking for a mode the switch lacks is refused naming `cluster.routing`"),
    _f("cluster.pod_gpus", "int", "GPUs under one non-blocking pod: oversubscription applies only above it",
       default_text="all GPUs", write=IF_GIVEN, given="pod_given"),
    _f("cluster.in_network_reduction", "bool", "All-reduce in the switches (NCCL CollNet / SHARP)", default=False,
       write=IF_SET, unset=False, more="needs a switch with SHARP"),
    _f("cluster.rank_assignment", "choice", "How the job's nodes are ordered among its ranks", write=IF_SET,
       choices=RankAssignment, default=RankAssignment.UNALIGNED, unset=RankAssignment.UNALIGNED,
       more="NCCL rings follow the rank order: `topology-aware` rings cross a tier once per block of the group under "
            "it, so oversubscription above the pods costs them far less (docs/performance-model.md section 3)"),
    _f("cluster.qps_per_connection", "int", "Queue pairs per NCCL connection (NCCL_IB_QPS_PER_CONNECTION)",
       default=DEFAULT_QPS, default_by="routing", default_text="4 for `ecmp-qp`, else 1", write=IF_NOT_DEFAULT),
    _f("cluster.switch", "key", "Switch model (a catalog key of the chosen fabric)", write=IF_SET,
       default_text="by fabric and speed: QM8700 / QM9700 / Q3400 for IB 200/400/800G, SN5600 for RoCE"),
    _f("cluster.nic", "key", "NIC model (a catalog key that reaches nic_gbps)", write=IF_SET,
       default_text="by speed: CX6-200G / CX7-400G / CX8-800G"),
    # ---- costs (numbers in the order the cost model resolves them; defaults: the facility catalog item)
    _f("costs.facility", "key", "Facility catalog item whose figures are the defaults below",
       default="FACILITY-DEFAULT"),
    _f("costs.facility_mode", "choice", "Colocation (per kW-month opex) or owned (construction capex)",
       choices=FacilityMode, default_text=FACILITY_DEFAULT),
    _f("costs.usd_per_kwh", "number", "Electricity price (USD per kWh)", default_text=FACILITY_DEFAULT,
       more="EIA 2023 industrial: VA 0.089, TX 0.066, CA 0.186"),
    _f("costs.pue", "number", "Power usage effectiveness (>= 1)", default_text=FACILITY_DEFAULT,
       more="industry average 1.56; liquid-cooled halls 1.1-1.25"),
    _f("costs.colocation_usd_per_kw_month", "number", "Colocation rate (USD per kW-month)",
       default_text=FACILITY_DEFAULT, more="CBRE H2 2024, North America wholesale"),
    _f("costs.construction_usd_per_mw", "number", "Construction cost of an owned facility (USD per MW)",
       default_text=FACILITY_DEFAULT, more="Cushman & Wakefield 2025"),
    _f("costs.facility_life_years", "number", "Facility amortization (years)", default_text=FACILITY_DEFAULT),
    _f("costs.depreciation_years", "number", "Hardware straight-line life (years)", default_text=FACILITY_DEFAULT),
    _f("costs.cost_of_capital", "number", "Annual rate; > 0 uses the annuity", default_text=FACILITY_DEFAULT),
    _f("costs.maintenance_share", "number", "Maintenance per year, a share of hardware capex", default_text=FACILITY_DEFAULT),
    _f("costs.install_share", "number", "Installation, once, a share of hardware capex", default_text=FACILITY_DEFAULT),
    _f("costs.avg_utilization", "number",
       "Average server power draw, a share of its maximum (0-1]: scales only the servers' electricity cost",
       default_text=FACILITY_DEFAULT),
    _f("costs.staff_usd_per_year", "number", "Staff cost (USD per year)", default_text=FACILITY_DEFAULT),
    _f("costs.storage_usd", "number", "Storage capex (USD)", default_text=FACILITY_DEFAULT),
    _f("costs.frontend_network_usd", "number", "Front-end network capex (USD)", default_text=FACILITY_DEFAULT),
    _f("costs.server", "key", "Server catalog key; must hold cluster.gpu and exactly gpus_per_node GPUs",
       default_text="the catalog server holding `gpus_per_node` x `gpu`"),
    _f("costs.prices", "object", "Unit price overrides (USD): {catalog key: price or range}"),
    _f("costs.planes", "int", "Planes of a multi-plane topology", auto=True, default_text="`nics_per_node`"),
    _f("costs.nodes_per_rack", "int", "Nodes per rack: drives copper vs optics to the leaf",
       default_text="the server's `nodes_per_rack` (4 for HGX, 1 for an NVL72 rack)"),
    _f("costs.leaf_placement", "choice", "Where the leaf switch sits", default=LeafPlacement.AUTO,
       choices=LeafPlacement),
    _f("costs.goodput", "object", "Failure and checkpoint inputs of the goodput model (docs/cost-model.md)"),
    _f("costs.goodput.failure_rate_scale", "number", "Failure rates relative to the catalog's (Llama 3 405B run)",
       default_text="`1`"),
    _f("costs.goodput.restart_min", "number", "Minutes to restart after an interruption",
       default_text="the catalog's"),
    _f("costs.goodput.checkpoint_bytes_per_param", "number", "Checkpoint bytes per parameter",
       default_text="the catalog's"),
    _f("costs.goodput.storage_write_gbytes_per_s", "number", "Checkpoint write rate of the storage (GB/s)",
       default_text="the catalog's"),
    _f("costs.goodput.node_write_gbytes_per_s", "number", "Checkpoint write rate of one node (GB/s)",
       default_text="the catalog's"),
    _f("costs.goodput.checkpoint_interval_min", "number", "Minutes between checkpoints",
       default_text="the optimum for the failure rate"),
    # ---- uncertainty
    _f("uncertainty.distribution", "choice", "How ranges without their own dist are sampled",
       default=Distribution.TRIANGULAR, choices=Distribution),
    _f("uncertainty.samples", "int", "Reserved: a run's samples are its params.monte_carlo"),
    _f("uncertainty.seed", "int", "Reserved: a run's seed is its params.seed"),
    _f("uncertainty.bins", "int", "Reserved: performance points are capped at 125"),
)

BY_PATH: dict[str, Field] = {f.path: f for f in FIELDS}


def field(path: str) -> Field:
    """The declared field at ``path`` (KeyError for a path the document does not have)."""
    return BY_PATH[path]


def section_fields(section: str) -> tuple[Field, ...]:
    """The fields directly under ``section`` (``""``: the top-level keys), in declaration order."""
    return tuple(f for f in FIELDS if f.section == section)


def keys(section: str) -> set[str]:
    """The keys ``section`` allows."""
    return {f.key for f in section_fields(section)}


def required(section: str) -> tuple[str, ...]:
    """The keys ``section`` requires, in declaration order."""
    return tuple(f.key for f in section_fields(section) if f.required)
