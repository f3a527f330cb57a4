"""The engine's version, and the fingerprint that says when it must move.

``ENGINE_VERSION`` is stored with every run: identical inputs reuse a stored result only under the same
version, and watched scenarios re-evaluate when it changes (simulations.services.reevaluation). So it must
change whenever a result can: :func:`fingerprint` hashes every file that can move a result (the engine's
Python modules and data files, not this module or the READMEs), and ``ENGINE_RELEASES`` records the fingerprint each
version was released with. tests/engine/test_version.py fails when the engine's files no longer match the
current version's fingerprint: add a new version to ``ENGINE_RELEASES`` with the value
``python scripts/engine_fingerprint.py`` prints (never edit an old entry).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ENGINE_DIR = Path(__file__).resolve().parent
FINGERPRINTED_SUFFIXES = (".py", ".json", ".csv")

# version -> fingerprint of the engine's files it was released with, oldest first
ENGINE_RELEASES: dict[str, str] = {
    # 1.0.0 ran from the first engine to the move to engine/ (issue #21); it predates fingerprints
    "1.0.0": "",
    # 2.0.0: the engine house (issue #21) and the first numbers of issue #22 - results move: fabric sizing with
    # whole-node leaves, DP placement, framework releases, NVFP4/MXFP8, overlap window, stragglers, error bands,
    # None figures for layouts that do not fit
    "2.0.0": "5f33190cb2d8f3a0452966058c08a8296997241287651eb5b9b7034084de05ad",
    # 2.1.0: error bands fitted on honest leave-one-source-out residuals (every row-derived constant refit without
    # the held-out source), the error on differences for comparisons, engine types renamed (ScenarioSpec,
    # CatalogItems), awkward-size advice (issue #24)
    "2.1.0": "e3e56701be1b3c3834793d157797727504ce361eb750712a25fbbdb297015184",
    # 2.2.0: HSDP (training.shard_group), selective recomputation by named module (training.recompute_modules),
    # MoE dispatch 1 B in every quantised format, awkward-size notes and batch advice, multi-rack NVL72 jobs of any
    # GPU count, the DeepSeek-V3 row's recomputation as published, LOSO refit values in the report
    "2.2.0": "0b4d9ac294b3c1ce9b1f7548036a46fcdfb850f986e440bc3745d3989329757b",
    # 2.3.0: MoE parallel folding (parallelism.etp: expert TP separate from attention TP, EP folded over t c d),
    # GPUs used per NVL72 rack (cluster.gpus_per_rack: 64 of 72, spares priced), the "64 of 72" sizing advice
    # predicted with it; validation rows unchanged
    "2.3.0": "f234227f4a2bbe2f3295fd269e45f0d31fc9c240d519bfc36cd9e4240fd54efe",
    # 2.4.0: validation rows audited against their sources: LLM Foundry MPT-13B H100 carries its table's settings
    # (batch 16, micro-batch 2, no checkpointing), MPT-3B has 20 heads, LLaMA 65B selective recomputation and
    # sequence parallelism, the two NeMo fp8 rows cite the 24.07 table their figures come from; error bands refit
    "2.4.0": "fed24746d0126f0ddfb008d4d64a8d846d8b9ecb8aaf348028f374c2cd8f9553",
    # 2.5.0: the flow simulator places MoE parallel folding (EP groups strided by etp); unfolded layouts unchanged
    "2.5.0": "254969584c54f07ca17ba5083057295436ce86a1cef3c3e292f71617b66bc67d",
    # 2.6.0: FFN activation cache in fp8 (training.activation_cache) and bf16 Adam moments (training.optimizer_moments);
    # the DeepSeek-V3 row carries both and the SwiGLU-output recomputation as its paper states (81.1 of 80.2 GB:
    # memory_uncertain, was 93.1 GB)
    "2.6.0": "2fa43234721bbabb94b4800c72af3363b7fda8f88701a5e837ca42bed15fcf5d",
    # 2.7.0: partial full recomputation (training.recompute_layers, Megatron's block method); the Megatron-Bridge H100
    # Llama 3 8B row recomputes 5 layers as its recipe does
    "2.7.0": "586cd006490bb7bddb3520ba8cd0e186ea6d040d36cffaf1d71011e3526f6952",
    # 2.7.1: no result changes: the NICs and hosts a job uses of a partly used rack come from one rule
    # (ClusterSpec.used_of_node); training's precision and recompute read once
    "2.7.1": "6151d81bee708988f5a9c7c9c9c07565c15508a54c4bf9d0ec756e25d24a4e8b",
    # 2.8.0: validation rows name the framework and release their sources date (Megatron-LM 2021-04 / 2022-05 /
    # commit 285068c8 2023-01 / f1f03922 2024-10, NeMo containers, DeepSpeed for MT-NLG 2021-10 and BLOOM 2022-03)
    "2.8.0": "3e10bba8a56f98cf3a97dbd40c970add329d18a3982427b205d160339d7a3985",
    # 2.9.0: multi-head latent attention (model.mla: latent down-projections whole on every TP rank, up-projections
    # and output by head, latents kept; recompute_modules mla_up_proj); DeepSeek-V2/V3 rows carry their MLA
    "2.9.0": "56392880904a184ea5652f9cddc09f0026c49255fe41db212dbc4651cf3fb01e",
    # 2.9.1: no result changes: one reader of the catalog's node_sizes (ClusterSpec.rack_scale, set by the parser)
    "2.9.1": "5b677ee9bb732dda7dad0368998fdca72f1506aa28651ffc1e4a52dced80d35f",
    # 2.9.2: no result changes: the TP-overlap refit sets the Megatron-Core records through one helper
    "2.9.2": "6ba618f79f08d02a13ff97aab1ef05a6e31ad5b9fee80004f4c57b35a752163e",
    # 2.9.3: no result changes: Context drops kv_heads, head_dim and q_dim (the attention's widths are Context.attn)
    "2.9.3": "7fcf9613459b41c0326de5176f6da7682b24422736a8fcaaddc68e911dde2d06",
    # 2.9.4: no result changes: AttentionWidths drops the unused up_proj_macs (derived from up_proj_in_widths)
    "2.9.4": "aef69fa6017711d6f0956079a8f94ea57354d79bbb090337a1bb4e6bd1dbf134",
    # 2.10.0: with sequence parallelism the step all-reduces the gradients of TP-duplicated weights (MLA
    # down-projections, MoE router) over TP once, exposed (Megatron-Core finalize_model_grads); validation rows
    # unchanged at the report's precision
    "2.10.0": "26c26b1df509781526b2a28f64f6db40d061bf51e343decc54dfa2bc0bbf3bac",
    # 2.11.0: parallelism.embedding_loss_in_split (Megatron-Core account_for_embedding/loss_in_pipeline_split): L + 2
    # places over p v virtual stages; the three Llama 3 405B rows state it (arXiv 2407.21783 s.3.3.2) and run vpp 8;
    # error bands refit
    "2.11.0": "faaaa490cd3f5a9554d94f9aba0a85a241bee304fdea73f144b8f4f83135f97e",
    # 2.11.1: with parallelism.embedding_loss_in_split the layers + 2 places split into whole stages and chunks
    # (Megatron-Core asserts it): other pp / vpp refused or not searched; validation rows unchanged
    "2.11.1": "c099a45f8d8cdbec6a8be050c0d68813027babc36220b353fea1a830338a517c",
    # 2.11.2: no result changes: the validation report counts the scaling steps within 3 points
    "2.11.2": "7beabb703b59c1ad4cf1d5851fe41d53eec4b2bb14e014299e02b30aae153086",
    # 2.11.3: no result changes: Context carries the pipeline split's places (ParallelismSpec.pipeline_slots)
    # instead of a second "+ 2"; the p = 2 stage and chunk-0 memory rules read edges_in_split
    "2.11.3": "bfd658f1f9894b7ef2cf23de5fcce49381582bdbfa5e2b8e551f91987c1eebc4",
    # 2.12.0: the last pipeline rank's activations follow Megatron's interleaved warm-up ((v-1)p chunk-forwards
    # plus one; was one micro-batch of its layers) and, with the embedding/loss split, its last chunk holds one
    # layer fewer; validation rows unchanged
    "2.12.0": "a0c43aadacf93346b25e1aac31fd16fd7b242367ab462d76ae087fc2ac0c80a6",
    # 2.12.1: no result changes: api.check_runnable (predict's refusals before evaluating: GPU precision, no layout,
    # search too large), called at save time
    "2.12.1": "111a5d22aafdbf5259af037acb932733b5641dc3159350b59bbfd3b1e13c715f",
    # 2.12.2: no result changes: document.validate's docstring names check_runnable
    "2.12.2": "952ac5e957c4757d0786c298f17c5d304b6df883095836de04aefc1f2bae9d93",
    # 2.12.3: no result changes: the last rank's last chunk is a chunk less the loss's place (not the edge stage
    # less its other chunks)
    "2.12.3": "00f0f39ab0aa4695fec945b181f583463f06097a32debcb75dab605ade66741c",
    # 2.13.0: Megatron's interleaved schedule runs only with micro-batches per step divisible by pp (and pp > 2 before
    # 2024-05): other interleaved layouts are left out of searches, a fixed vpp that needs one is refused (Megatron
    # SC21 39.1B: vpp 8 -> 1)
    "2.13.0": "d3568f2fbc406550039393e7ea7cf87e4c7e35984b33332104f54ec709d13719",
    # 2.13.1: no result changes: parallelism.vpp's field text states the interleaved schedule's rules
    "2.13.1": "c5ea1809ddf5d082624a3007fa4e683e680871738f1abc2f0e09f8e269d79608",
    # 2.13.2: DeepSpeed's pipeline engine runs ZeRO-0/1 only: ZeRO-2/3 with pp > 1 left out of its searches, refused
    # when fixed (no validation row changes)
    "2.13.2": "a058ce327f5fa30b7a4e0531831eb21eda6068f3bc2ff0d027735b5e6ab36cf2",
    # 2.13.3: no result changes: the interleaved schedule's refusal names the one rule no layout meets
    "2.13.3": "068260271d2dc984af356dcb0d7e830c76e81360d0fede35a850f653e8471410",
    # 2.13.4: no result changes: api.RUNNABLE_INPUTS names what check_runnable reads (planning.runnable_key uses it)
    "2.13.4": "5e2642b2800d9274add3df60d42f4d135d6dcce6f6cafb077bcc2bdd3493d1b2",
    # 2.13.5: no result changes: frameworks.py's module text lists the layout rules the profiles carry
    "2.13.5": "7cbda2e97c757012140a05c8bb1f60ff25a4b60454929888198b0f0401eedaad",
    # 2.14.0: the stacks' layout rules are one table (layout_rules.py, the profile resolved once). New rule: Megatron's
    # ZeRO-3 from 2024-11 to 2025-02 (--use-torch-fsdp2) ran without pipeline or expert parallelism (e1993fa6f7;
    # Megatron-FSDP from d165a8548b). The framework auto takes Megatron-Core's interleaved rules at the release (was
    # the current record's). No validation row changed
    "2.14.0": "f2fd096e7a7ce2631e1f5749baa080172a3bbd624585cfb38fcc23efdde1991a",
    # 2.15.0: attention kernel classes (training.attention "native": cuDNN / FlashAttention-3/4 at their measured
    # rates and length curve, hardware.attn_eff_native / attn_native_half_len; "auto" = what the stack ran:
    # Transformer Engine stacks native on Hopper from 2023-12, Megatron-Core on TE from 2024-04, Blackwell native by
    # default); Blackwell's FlashAttention-2 rate 0.15 (was Hopper's 0.35). Validation: all sets 8.8% -> 8.6% LOSO,
    # Blackwell 9.1% -> 8.5%; ZeRO rules beside PP / EP written once (layout_rules._zero_beside)
    "2.15.0": "b0f03d19730c3d059372c194da71b5a636e08e4ff84a6cb6d94f749dec5bdc27",
    # 2.15.1: no result changes: a ZeRO refusal quotes the refusing stack's own source (layout_rules._zero_beside)
    "2.15.1": "48461b54151376102a1be170930e77cecaddc9bc53e66695fb373595855968b9",
    # 2.15.2: no result changes: the Blackwell set's text says its attention rates are its own kernels'
    "2.15.2": "c3320058b278728f12c5f485e7f6478cd92414c868d2f06e016c952f74062c47",
    # 2.16.0: a pipeline of stages narrower than a node pays its node boundary with inner DP placement too (it ran
    # every hop on NVLink), and a boundary's few senders share the node's NICs (collectives/p2p.boundary_nic_share)
    "2.16.0": "c2ddb1151960d95d5d4aa0ea7a48d527bb907672906abdc1bda476ae5b9ebe64",
    # 2.17.0: Megatron's TP collectives hidden as its source does (asynchronous column-parallel backward from 2021-09,
    # bounded by the backward GEMMs of the TP linears, which are then no window for other traffic) instead of a 0.3
    # share calibrated on the public set; NeMo keeps its userbuffer share
    "2.17.0": "e365189699eeddd18cc1cdc58604210a417a6f4120d4562cd3bc6f6149dc6534",
    # 2.17.1: no result changes: terms/tensor_parallel.py's docstring reflowed
    "2.17.1": "f67bf5428ca881ba012c3a2dc75f0b8f2e9c03ab984653c90f54964fe3cc4fb9",
    # 2.17.2: no result changes: hardware.py says the GEMM efficiencies were set beside the old TP share, left as set
    "2.17.2": "5690195a38317e9c8d3fd9f72ea22424db2416d83600eefacdb7285c9a6ecdb8",
    # 2.17.3: no result changes: the validation report's scaling table says which predicted step terms grew
    "2.17.3": "9b846d232a359742c13777c8f79a4773c75117ca42a498bcec8d502cb836bf81",
    # 2.18.0: each side of a layer bounds its hidden TP pair by its own backward GEMMs (the FFN side's include the
    # shared experts, whose pair it hides; 2.17 bounded both sides together by the attention and dense-FFN GEMMs)
    "2.18.0": "7d2739b52e6e27ca0f4e578b1d4ff989052bbed884231701dbcf795c3d9ba865",
    # 2.19.0: Megatron-Core (and NeMo) before the distributed optimizer (d07d29df14, 2022-06) run ZeRO-0 only: a named
    # earlier release refuses training.zero > 0 and its searches keep ZeRO-0
    "2.19.0": "84e2b4aefb6020fc491d9b0d4989eeaf8a418c5566ac5f401ce881a23e7b2c1b",
    # 2.19.1: no result changes: the backward window less TP's GEMMs computed once in model.py, the refit's unused
    # row filter removed, long lines reflowed
    "2.19.1": "7759bbeff6e794374dc1389f84f800b3d8bc8f9d08b4a74941e9aecce5c8b2d4",
    # 2.20.0: the output layer and loss run on the last pipeline rank beside its whole layers (terms/pipeline.
    # last_rank_layers): the best whole-layer split where the stack can give that rank fewer layers, every rank L / p
    # layers plus the output layer on the last where it splits evenly (Megatron-LM before fa8bb5921b, 2024-09;
    # FrameworkProfile.uneven_pipeline_split), replacing the even share of layers + logits that no split reaches.
    # Also (no result change): the order statistic's inverse normal CDF taken once per distinct rank count
    "2.20.0": "9157d9fa690ae5c0db629351cdaf94e541720c45519e4c015bf3995741f51607",
    # 2.20.1 (no result change): bottleneck_stage drops its floor at the even share (last_rank_layers is never below
    # it: whole layers summing to L + g over p ranks); refit.calibration_rows reflowed. docs/validation.md identical.
    "2.20.1": "3e87c90fd27d7d5b0045700d74984b554ebf2f9978960ee9d8fdc091b2284e7a",
    # 2.21.0: with virtual stages the first model chunk's share of the step-level DP traffic hides only under its
    # own last backward / first forward (terms/data_parallel.first_chunk_exposure), and not at all for the gradients
    # where the stack reduces a chunk after its last backward (Megatron-LM / NeMo from 5d745a79cd, 2023-09:
    # FrameworkProfile.grad_sync_after_chunk)
    "2.21.0": "1755c9d984f59defcff55e274b5c18a9f49d681c673756e5d293d5bd937daa14",
    # 2.22.0: cluster.rank_assignment (unaligned | topology-aware): with ranks in switch order a ring leaves each
    # block of the group under a leaf or pod once (placement.ring_cross_fraction, Placement.share_ring, used by the
    # ring and NVLS schedules); the Llama 3 405B rows state it (Meta's topology-aware rank assignment)
    "2.22.0": "d2eb5c723d537f6900a0d4b6c0d5f6c47d8411e10c2d6a1d64852ce1f216ec7a",
    # 2.22.1 (no result change): placement.py's and data_parallel.py's module texts say what 2.21.0 / 2.22.0 added
    "2.22.1": "5a025f690fa6a34a7d20cec24c9a561bdb45851d8ca20c209296322090a0f8bc",
    # 2.23.0: training.cp_comm_type (p2p | all-gather): the all-gather form of context parallelism puts its K/V
    # all-gather and dK/dV reduce-scatter in the critical path (terms/context_parallel.py); the Llama 3 128K row
    # states it (arXiv 2407.21783 s.3.3.2)
    "2.23.0": "2607a4f1632d7a48dcb0acc896baf3652dc7d572ca6b4164198866c8b88f47d9",
    # 2.23.1 (no result change): TrainingSpec.cp_comm_type and ClusterSpec.rank_assignment default to their enums'
    # constants instead of repeating the values
    "2.23.1": "23856fcfd2c4b7dfd2b0a3a6c70a6741123844f9ca65a0b206a74bc0f21e046b",
    # 2.23.2 (no result change): placement._spread takes the leaf/pod fractions and the routing share from one pair
    # of helpers for both the unaligned and the ring-in-switch-order figures (2.22.0 had written the second copy out)
    "2.23.2": "ba96a463ed12d41c907897226bb2167cd7bc2361f1f91909c570e94e48c2d7a6",
    # 2.24.0: model.parallel_block (terms/block.py): the GPT-J / PaLM / MegaScale parallel transformer block - one
    # layernorm and one residual add (8h of elementwise traffic instead of 12h, two launches fewer), one layernorm
    # input and one shared GEMM input kept (4h instead of 8h), one fp8 output-gradient cast, and the branches'
    # tensor-parallel outputs reduced once per pass (GPT-NeoX gpt_j_residual): one exposed pair per layer fewer.
    # The MegaScale arm's two rows state it (Sec. 3.1): +11.4% / +12.4% -> +8.2% / +9.2%; network set 10.7% ->
    # 10.1%, all sets LOSO 8.6% -> 8.5%
    "2.24.0": "2b0d2dabd4d1d9643386e85222f52ad945bb308fd56acacacdd81a11b7277064",
    # 2.25.0: model.global_attention_every (with model.attention_window): every k-th layer attends to the whole
    # sequence, the rest to the window (Gemma 3, GPT-OSS, Llama 4); attention FLOPs and fused-kernel time are the
    # layers' mix (Context.attention_kinds). No validation row uses it: docs/validation.md regenerates identical
    "2.25.0": "77a93cf4fd6a7bb9290d3e76d0213d3288bf05e6de9b13fa9d29e530429c25ed",
    # 2.26.0: training.cp_comm_type a2a (DeepSpeed-Ulysses, Megatron-Core --cp-comm-type a2a): two exposed
    # all-to-alls of Q, K, V and the output per layer and micro-batch, the kernel over the whole sequence in one
    # block; layouts whose TP-rank heads do not divide by cp are not run. The MegaScale-MoE arm's rows state it
    # (their attention SP is Ulysses-style): +6.1% / -2.8% -> +4.6% / -4.3%; set MAPEs unchanged
    "2.26.0": "43ac51dece768d10234aeb4d48d0264ae75ced6447105577905c60829d08440f",
    # 2.26.1 (no result change): stragglers.expected_max_z takes Blom's inverse normal CDF over the whole sweep
    # with scipy.special.ndtri instead of once per distinct rank count (np.unique, statistics.NormalDist, a cache);
    # moe_balance calls it directly. Equal to 1e-15; docs/validation.md and error_bands.json regenerate identical
    "2.26.1": "5456c2360123092f53de3c4e9a29684e6f2259ba751122bb2d508a8fc516bb32",
    # 2.26.2 (no result change): ContextParallelComm.alltoall_bytes (what one Ulysses exchange moves per rank, in
    # explain beside the ring's kv_bytes); ulysses_bytes replaces ulysses_alltoalls
    "2.26.2": "874d93338edcb8a118bce69fe36f2f4e9a6c86d1db3f1c8e0fe4fa19d73774c1",
    # 2.27.0: full recomputation reruns each checkpointed layer's forward collectives, on the share of the layers it
    # checkpoints (shape.recomputed_forwards): the ring's K/V all-gather (3 -> 4, hidden also under the recomputed
    # attention forward) and Ulysses' forward exchange (2 -> 3) were not counted; TP's +2 pairs and EP's +1 pair
    # were counted whole with training.recompute_layers. No validation row moves (none runs CP with full
    # recomputation, the recompute_layers row has no TP, EP or CP)
    "2.27.0": "28224de2e18462702da1ce3277ba6fa9b8615d6157e5899f8f6f4c582c410e36",
    # 2.27.1 (no result change), from reading the session's diff: context_parallel_comm branches once on the CP
    # form (the all-to-all bytes were chosen on the flag beside the branch that used them); docstrings reflowed
    "2.27.1": "8f2807249ca4f2cf2ddf65235637e2c919b3a431ae5cfa889eb195d81670fe86",
    # 2.28.0: multi-token prediction (model.mtp_layers, terms/mtp.py): D modules (a 2h x h projection, one layer of
    # the last layer's kind, the output head and loss again) counted in FLOPs as Megatron-LM counts them, run on the
    # last pipeline rank beside the output layer (the bottleneck stage's tail now carries compute and the modules'
    # per-layer communication), their weights (with a pipeline the embedding copy) and one micro-batch of their
    # activations and logits in the last rank's memory; param_count includes them. DeepSeek-V3's row states its one
    # module (Sec. 2.2 / 4.2): its GPU-hours stay within 0.1% (its last rank has slack in the 61-layer split)
    "2.28.0": "c392197e1a3417f78f28f27be96c8c334bd3421f6ce4c042e40a721a9c680b0d",
    # 2.29.0: DeepSpeed's pipeline sends and receives block one at a time (pipe/p2p.py asserts async_op False at
    # 2021-10 and 2025-02; TrainSchedule's RecvActivation, SendGrad / SendActivation, RecvGrad): four transfers per
    # micro-batch in a row where Megatron's batched pairs take two (FrameworkProfile.p2p_sequential). MT-NLG
    # -11.4/-12.4/-14.8% -> -11.0/-11.9/-14.4%, BLOOM +2.3% -> +0.9%; all-sets LOSO 8.5% -> 8.4%
    "2.29.0": "00e169578ba61c645c24b4d4b7d46a1bac969a1eede969238579a5cdd490bc84",
    # 2.29.1 (no result change): a scenario without multi-token-prediction modules skips their terms (no projection
    # GEMM timed, no second state count for the first rank) on the search's hot path
    "2.29.1": "804be97cd4d4c87355c65cdeda049167143bdf4410de44c4f5da25e3d2875b08",
    # 2.29.2 (no result change), from reading the session's diff: BottleneckStage.comm_layers has no default (every
    # stage is built by bottleneck_stage); comments on the last rank's states and what the MTP term leaves out
    "2.29.2": "be970aeda863ba6e248a8e93349a266354394d9ba109df4a05a3e0a87f554076",
    # 2.29.3 (no result change): the DeepSpeed profile's comment on its blocking transfers reflowed under 120 columns
    "2.29.3": "4a106604d85b0158866e7a07d0136d8a312fe1c8afe29be9d97c0444f9fb8bed",
    # 2.29.4 (no result change): terms/mtp.py's account of the projection's TP collectives it leaves out corrected
    # (with SP an all-gather of the 2h input and of the h output, about 3/4 of a layer's TP traffic; was "one gather")
    "2.29.4": "f42c8172189fc3000f1d66db578ea179068cf6ac0266478d0217d8096ac7d3b1",
    # 2.30.0: the multi-token-prediction projections' own TP collectives (terms/mtp.projection_tp_comm, as
    # Megatron-Core's _concat_embeddings runs them: the output's all-gather, with SP the 2h input's and the output
    # gradient's, the input gradient's reduce-scatter or all-reduce), charged on the last rank's tail; none at TP 1
    # (no validation row moves: DeepSeek-V3 ran TP 1)
    "2.30.0": "ba747e89ab239f30f2691e7becee24cc65a287103f105c84813f98d252fdd6d3",
    # 2.31.0: full recomputation reruns the multi-token-prediction modules (projection GEMM and its forward gathers,
    # the layer; hardware FLOPs) only where the stack checkpoints them (terms/mtp.mtp_reruns; FrameworkProfile.
    # mtp_recompute: Megatron-Core from 08abeedbfe, 2025-08, 'uniform' method; its 'block' method skips them), the
    # module's layer timed without its recomputed forward elsewhere (was: every full recomputation reran the layer,
    # never the projection). No validation row moves (DeepSeek-V3 recomputes selectively)
    "2.31.0": "f2381002577d3db68b1f9286553f94d5e490ab1975f662a825a5c9ce725ef859",
    # 2.31.1 (no result change): engine/validation/summary.py and the accuracy summary it writes beside
    # docs/validation.md (engine/validation/data/accuracy_summary.json), which the portal's Accuracy page and
    # GET /api/v1/accuracy/ show
    "2.31.1": "92043479408ba24e85b1597587b9aa16fb2fbfcea213456cec4eb09b79593d10",
    # 2.32.0: the multi-token-prediction modules' layers add their TP-duplicated weights (MLA down-projections, the
    # router) to the step's all-reduce of such gradients under sequence parallelism (terms/parameters.
    # tp_duplicated_params), counted with the last rank as their weights are. No validation row moves (V3: TP 1)
    "2.32.0": "1446567d4baa3781e6b2b6a59066e24440a0edc970feebdf4b575304bf76384f",
    # 2.32.1 (no result change): the accuracy summary says of each run whether it fell in its 80% band
    "2.32.1": "5e47e0706569807676ad3d5eda3b706536b3dd706f06f4dad80a85ec1d5ffa53",
    # 2.32.2 (no result change), from the final read: MtpCompute carries its reruns_count for step_flops (mtp_reruns was
    # evaluated twice per step_terms); a redundant TP-size mask in projection_tp_comm; report.py's orphaned comment
    "2.32.2": "044cfe88ed12566f229361916d9b56e0ccb669e92df74f7ca4b49ac113667f98",
}
ENGINE_VERSION = next(reversed(ENGINE_RELEASES))


def engine_files(engine: Path = ENGINE_DIR) -> list[Path]:
    """The files whose content can change an engine result, in a stable order."""
    return sorted(
        p for p in engine.rglob("*")
        if p.is_file() and p.suffix in FINGERPRINTED_SUFFIXES and "__pycache__" not in p.parts
        and p.relative_to(engine).as_posix() != "version.py"
    )


def fingerprint(engine: Path = ENGINE_DIR) -> str:
    """sha256 over the relative path and content of every :func:`engine_files` file."""
    h = hashlib.sha256()
    for p in engine_files(engine):
        h.update(p.relative_to(engine).as_posix().encode())
        h.update(b"\0")
        h.update(p.read_bytes().replace(b"\r\n", b"\n"))
        h.update(b"\0")
    return h.hexdigest()
