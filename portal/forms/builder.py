"""The scenario builder form: HTML input → the engine document sections the scenario services take."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from django import forms

from engine.schema.enums import Fabric
from engine.schema.fields import AUTO, DEFAULT_ROUTING, field
from planning.services import gpu_server_item
from portal.forms.builder_costs import DEFAULT_DISTRIBUTION, costs_section, uncertainty_section
from portal.forms.builder_initial import initial_from_document
from portal.forms.builder_sections import (
    MLA_FIELDS,
    MLA_REQUIRED_INPUTS,
    MOE_FIELDS,
    MOE_REQUIRED_INPUTS,
    cluster_section,
    model_section,
    parallelism_section,
    training_section,
)
from portal.forms.common import (
    ACTIVATION_CACHE_CHOICES,
    COST_FIELDS,
    CP_COMM_TYPE_CHOICES,
    DISPATCHER_CHOICES,
    DISTRIBUTION_CHOICES,
    FABRIC_CHOICES,
    FLEET_CLUSTER_FIELDS,
    FRAMEWORK_CHOICES,
    LINK_SPEEDS,
    OPTIMIZER_MOMENTS_CHOICES,
    PAR_MODE_CHOICES,
    PRECISION_CHOICES,
    RANGE_INPUTS,
    RANK_ASSIGNMENT_CHOICES,
    RECOMPUTE_CHOICES,
    ROUTING_CHOICES,
    TOPOLOGY_CHOICES,
    FieldErrorMixin,
    _catalog_choices,
    gpu_nic_speeds,
    int_input,
    number_input,
)
from portal.presets import DEFAULT_PRESET, PRESETS, preset_choices, preset_form_fields


class ScenarioBuilderForm(FieldErrorMixin, forms.Form):
    name = forms.CharField(max_length=120)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    watched = forms.BooleanField(required=False, label="Watch: re-evaluate when prices or the engine change")

    # workload (limits, choices and help: the engine's declaration of each document field, via common)
    preset = forms.ChoiceField(choices=preset_choices, initial=DEFAULT_PRESET, label="Workload")
    model_name = forms.CharField(max_length=120, label="Model name")
    layers = int_input("model.layers")
    hidden = int_input("model.hidden", label="Hidden size")
    heads = int_input("model.heads", label="Attention heads")
    kv_heads = int_input("model.kv_heads", label="KV heads")
    ffn_hidden = int_input("model.ffn_hidden", label="FFN hidden")
    gated_ffn = forms.BooleanField(required=False, label="Gated FFN (SwiGLU)")
    parallel_block = forms.BooleanField(required=False, label="Parallel block (attention beside FFN)",
                                        help_text=f"{field('model.parallel_block').help}; dense models only")
    vocab = int_input("model.vocab", label="Vocabulary")
    attention_window = int_input("model.attention_window", required=False, label="Attention window (tokens)",
                                 help_text=f"{field('model.attention_window').help}. Empty = full attention")
    global_attention_every = int_input("model.global_attention_every", required=False,
                                       label="Global attention every k layers",
                                       help_text=f"{field('model.global_attention_every').help}. Needs a window; "
                                                 "empty = every layer windowed")
    seq_len = int_input("model.seq_len", label="Sequence length")
    mtp_layers = int_input("model.mtp_layers", required=False, label="Multi-token prediction modules",
                           help_text=f"{field('model.mtp_layers').help}. Empty = none")
    # mixture of experts (all empty = a dense model)
    moe_experts = int_input("model.moe.experts", required=False, label="Routed experts",
                            help_text="Per MoE layer; empty = a dense model")
    moe_top_k = int_input("model.moe.top_k", required=False, label="Experts per token (top-k)")
    moe_expert_ffn = int_input("model.moe.expert_ffn_hidden", required=False, label="Expert FFN hidden")
    moe_shared_experts = int_input("model.moe.shared_experts", required=False, label="Shared experts")
    moe_dense_layers = int_input("model.moe.dense_layers", required=False, label="Dense layers first")
    moe_dense_ffn = int_input("model.moe.dense_ffn_hidden", required=False, label="Dense-layer FFN hidden",
                              help_text="Empty = the FFN hidden above")
    # multi-head latent attention (all empty = standard multi-head / grouped-query attention)
    mla_kv_lora_rank = int_input("model.mla.kv_lora_rank", required=False, label="MLA KV latent rank",
                                 help_text="Width of the compressed key/value latent; empty = standard attention")
    mla_q_lora_rank = int_input("model.mla.q_lora_rank", required=False, label="MLA query latent rank",
                                help_text="Width of the compressed query latent; empty or 0 = no query compression")
    mla_qk_nope_head_dim = int_input("model.mla.qk_nope_head_dim", required=False, label="MLA query/key head width")
    mla_qk_rope_head_dim = int_input("model.mla.qk_rope_head_dim", required=False, label="MLA rotary head width")
    mla_v_head_dim = int_input("model.mla.v_head_dim", required=False, label="MLA value head width")
    global_batch = int_input("training.global_batch", label="Global batch (sequences)")
    tokens_b = number_input("training.tokens", scale=1e9, label="Training tokens (billions)")
    precision = forms.ChoiceField(choices=PRECISION_CHOICES, initial=field("training.precision").default,
                                  help_text=field("training.precision").help)
    recompute = forms.ChoiceField(choices=RECOMPUTE_CHOICES, initial=AUTO, label="Activation recompute",
                                  help_text=field("training.recompute").help)
    recompute_layers = int_input("training.recompute_layers", required=False, label="Recompute layers per chunk",
                                 help_text="Only with full recompute: the first n layers of each pipeline chunk "
                                           "recomputed (Megatron's block method). Empty = all")
    activation_cache = forms.ChoiceField(choices=ACTIVATION_CACHE_CHOICES, initial="", required=False,
                                         label="Activation cache format",
                                         help_text=f"{field('training.activation_cache').help}. fp8 needs an "
                                                   "fp8 or fp4 precision")
    optimizer_moments = forms.ChoiceField(choices=OPTIMIZER_MOMENTS_CHOICES, initial="", required=False,
                                          label="Optimizer moments format",
                                          help_text=f"{field('training.optimizer_moments').help}; "
                                                    "master weights stay fp32")
    cp_comm_type = forms.ChoiceField(choices=CP_COMM_TYPE_CHOICES, initial="", required=False,
                                     label="Context-parallel communication",
                                     help_text=f"{field('training.cp_comm_type').help}; only with CP > 1")
    framework = forms.ChoiceField(choices=FRAMEWORK_CHOICES, initial=AUTO, required=False,
                                  label="Training framework",
                                  help_text="Which communication it overlaps, from its documented defaults")
    moe_dispatcher = forms.ChoiceField(choices=DISPATCHER_CHOICES, initial=AUTO, required=False,
                                       label="MoE token dispatcher",
                                       help_text="Default: the framework's (Megatron-Core all-gather), else all-to-all")
    par_mode = forms.ChoiceField(choices=PAR_MODE_CHOICES, initial="auto", label="Parallelism",
                                 widget=forms.RadioSelect)
    tp = int_input("parallelism.tp", required=False, label="Tensor parallel (TP)")
    pp = int_input("parallelism.pp", required=False, label="Pipeline parallel (PP)")
    vpp = int_input("parallelism.vpp", required=False, label="Virtual pipeline stages (VPP)",
                    help_text=f"{field('parallelism.vpp').help}. Empty = searched")
    cp = int_input("parallelism.cp", required=False, label="Context parallel (CP)")
    ep = int_input("parallelism.ep", required=False, label="Expert parallel (EP)")
    etp = int_input("parallelism.etp", required=False, label="Expert TP (folding)",
                    help_text="MoE parallel folding: the experts' TP degree. Empty = TP")
    embedding_loss_in_split = forms.BooleanField(
        required=False, label="Embedding and loss in the pipeline split",
        help_text=f"{field('parallelism.embedding_loss_in_split').help} (Megatron-Core, Llama 3): PP × VPP may "
                  "then reach the layers + 2")

    # cluster
    fleet = forms.ChoiceField(required=False, label="Cluster",
                              help_text="An existing fleet supplies the cluster; or describe an ad-hoc one.")
    gpu = forms.ChoiceField(label="GPU generation")
    gpus = int_input("cluster.gpus", initial=1024, label="Cluster size (GPUs)")
    gpus_per_node = int_input("cluster.gpus_per_node", initial=8, label="GPUs per server")
    nics_per_node = int_input("cluster.nics_per_node", required=False, label="Scale-out NICs per server",
                              help_text="Empty = one per GPU")
    gpus_per_rack = int_input("cluster.gpus_per_rack", required=False, label="GPUs used per rack",
                              help_text="NVL72 racks: e.g. 64 of 72, the spares bought with the rack. Empty = all")
    nic_gbps = forms.TypedChoiceField(choices=LINK_SPEEDS, coerce=int, initial=400, label="Link speed",
                                      widget=forms.RadioSelect)
    fabric = forms.ChoiceField(choices=FABRIC_CHOICES, initial=field("cluster.fabric").default,
                               widget=forms.RadioSelect)
    routing = forms.ChoiceField(choices=ROUTING_CHOICES, initial="", required=False, label="Routing",
                                help_text=f"{field('cluster.routing').help}. Fabric default: "
                                          + ", ".join(f"{r} on {Fabric.label(f)}" for f, r in DEFAULT_ROUTING.items()))
    topology = forms.ChoiceField(choices=TOPOLOGY_CHOICES, initial=field("cluster.topology").default)
    oversubscription = number_input("cluster.oversubscription", initial=field("cluster.oversubscription").default,
                                    label="Oversubscription (down:up)", help_text="1.0 = non-blocking")
    rank_assignment = forms.ChoiceField(
        choices=RANK_ASSIGNMENT_CHOICES, initial=field("cluster.rank_assignment").default, required=False,
        label="Rank assignment", help_text="Topology-aware: the scheduler orders ranks by leaf and pod, so rings cross "
                                           "the oversubscribed tier rarely (docs/performance-model.md section 3)")
    pod_gpus = int_input(
        "cluster.pod_gpus", required=False, label="Non-blocking pod (GPUs)",
        help_text="GPUs under the oversubscribed tier, at full bandwidth among themselves: only traffic leaving "
                  "the pod is slowed. Empty = the fabric as built (the engine's default).")

    # cost assumptions (passed through to the TCO model as the scenario's "costs")
    usd_per_kwh = number_input("costs.usd_per_kwh", initial=0.08, label="Electricity ($/kWh)")
    pue = number_input("costs.pue", initial=1.3, label="PUE")
    depreciation_years = number_input("costs.depreciation_years", initial=5, label="Depreciation (years)")
    # only the servers' electricity scales with it (not a busy share of the year): help from the declaration
    avg_utilization = number_input("costs.avg_utilization", initial=0.8, label="Server power draw (share of max)")

    failure_rate_scale = number_input("costs.goodput.failure_rate_scale", initial=1.0, required=False,
                                      label="Failure rate (× Llama 3)",
                                      help_text="Interruptions relative to the Llama 3 405B run (1 = same rates)")

    # uncertainty: optional low/high around the likely value -> ranges in "costs" (Monte Carlo P10/P50/P90)
    usd_per_kwh_low = number_input("costs.usd_per_kwh", required=False, label="Electricity low ($/kWh)",
                                   help_text="")
    usd_per_kwh_high = number_input("costs.usd_per_kwh", required=False, label="Electricity high ($/kWh)",
                                    help_text="")
    pue_low = number_input("costs.pue", required=False, label="PUE low", help_text="")
    pue_high = number_input("costs.pue", required=False, label="PUE high", help_text="")
    server_price_low_pct = forms.FloatField(min_value=-90, max_value=0, required=False,
                                            label="Server price low (% vs list)", help_text="e.g. −10")
    server_price_high_pct = forms.FloatField(min_value=0, max_value=500, required=False,
                                             label="Server price high (% vs list)", help_text="e.g. 25")
    failure_rate_scale_low = number_input("costs.goodput.failure_rate_scale", required=False,
                                          label="Failure rate low (× Llama 3)", help_text="")
    failure_rate_scale_high = number_input("costs.goodput.failure_rate_scale", required=False,
                                           label="Failure rate high (× Llama 3)", help_text="")
    distribution = forms.ChoiceField(choices=DISTRIBUTION_CHOICES, initial=DEFAULT_DISTRIBUTION,
                                     required=False, label="Distribution")

    PATHS = {
        "name": "name", "description": "description",
        "model": "model_name", "model.name": "model_name", "model.layers": "layers", "model.hidden": "hidden",
        "model.heads": "heads", "model.kv_heads": "kv_heads", "model.ffn_hidden": "ffn_hidden",
        "model.gated_ffn": "gated_ffn", "model.parallel_block": "parallel_block", "model.vocab": "vocab",
        "model.attention_window": "attention_window", "model.global_attention_every": "global_attention_every",
        "model.seq_len": "seq_len", "model.mtp_layers": "mtp_layers",
        "model.head_dim": "heads", "model.mla": "mla_kv_lora_rank", "model.moe": "moe_experts",
        **{f"model.moe.{key}": field for field, key in MOE_FIELDS.items()},
        **{f"model.mla.{key}": field for field, key in MLA_FIELDS.items()},
        "training.global_batch": "global_batch", "training.tokens": "tokens_b",
        "training.precision": "precision", "training.recompute": "recompute", "training.framework": "framework",
        "training.moe_dispatcher": "moe_dispatcher", "training.expert_kernel": "moe_dispatcher",
        "training.micro_batch": "global_batch", "training.zero": "par_mode", "training.shard_group": "par_mode",
        "training.recompute_layers": "recompute_layers", "training.recompute_modules": "recompute",
        "training.activation_cache": "activation_cache", "training.optimizer_moments": "optimizer_moments",
        "training.cp_comm_type": "cp_comm_type",
        "training.framework_release": "framework",
        "parallelism": "par_mode", "parallelism.tp": "tp", "parallelism.pp": "pp", "parallelism.dp": "par_mode",
        "parallelism.cp": "cp", "parallelism.ep": "ep", "parallelism.etp": "etp", "parallelism.vpp": "vpp",
        "parallelism.sequence_parallel": "par_mode", "parallelism.embedding_loss_in_split": "embedding_loss_in_split",
        "cluster.gpu": "gpu", "cluster.gpus": "gpus", "cluster.gpus_per_node": "gpus_per_node",
        "cluster.nics_per_node": "nics_per_node", "cluster.gpus_per_rack": "gpus_per_rack", "cluster.routing": "routing",
        "cluster.qps_per_connection": "routing", "cluster.switch": "fabric", "cluster.nic": "nic_gbps",
        "cluster.in_network_reduction": "fabric", "cluster.rank_assignment": "rank_assignment",
        "cluster.nic_gbps": "nic_gbps", "cluster.fabric": "fabric", "cluster.topology": "topology",
        "cluster.oversubscription": "oversubscription", "cluster.tiers": "topology", "cluster.pod_gpus": "pod_gpus",
        "cluster": "fleet", "fleet": "fleet",
        "costs.usd_per_kwh": "usd_per_kwh", "costs.pue": "pue",
        "costs.depreciation_years": "depreciation_years", "costs.avg_utilization": "avg_utilization",
        "costs.goodput.failure_rate_scale": "failure_rate_scale_low", "costs.prices": "server_price_low_pct",
        "costs.server": "gpu", "uncertainty": "distribution", "uncertainty.distribution": "distribution",
    }

    def __init__(self, *args: Any, catalog_items: Iterable[Mapping[str, Any]] = (),
                 fleets: Iterable[tuple[Any, Mapping[str, Any]]] = (), base_costs: Mapping[str, Any] | None = None,
                 base_uncertainty: Mapping[str, Any] | None = None, base: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        """``fleets``: (fleet, its engine cluster section) pairs the user may pick from. ``base_costs`` /
        ``base_uncertainty`` / ``base``: the edited scenario's stored sections (``base``: model, training,
        parallelism, cluster, fleet_id, and the document's pinned extras: fabric_study, calibration), so keys
        the builder does not show survive (builder_sections)."""
        super().__init__(*args, **kwargs)
        self.base_costs = dict(base_costs or {})
        self.base_uncertainty = dict(base_uncertainty or {})
        self.base = dict(base or {})
        items = list(catalog_items)
        self.catalog = {i["key"]: i for i in items if "key" in i}
        #: GPU key -> GPUs per server its systems come in (72 for GB200/GB300 NVL72 racks), for the builder's JS
        self.gpu_node_sizes = {
            k: int(i["specs"]["default_gpus_per_node"]) for k, i in self.catalog.items()
            if i.get("kind") == "gpu" and isinstance((i.get("specs") or {}).get("default_gpus_per_node"), int)
        }
        #: GPU key -> its default NIC speed (the catalog's ``default_nic_gbps``, as the engine's parser takes it
        #: when a document gives none): switching GPU in the builder brings it (800 for GB300)
        self.gpu_nic_speeds = gpu_nic_speeds(self.catalog)
        pairs = list(fleets)
        self.fleets = {str(f.pk): f for f, _ in pairs}
        self.fleet_clusters = {str(f.pk): dict(c) for f, c in pairs}
        self._choice("fleet").choices = [("", "Ad-hoc cluster (describe it below)")] + [
            (str(f.pk), f"{f.name} · {f.gpus:,} GPUs") for f in self.fleets.values()]
        gpus = _catalog_choices(items, "gpu")
        self._choice("gpu").choices = gpus or [("H100-SXM", "NVIDIA H100 SXM")]
        if not self.is_bound and not self.initial.get("gpu"):
            keys = [k for k, _ in gpus]
            self.initial.setdefault("gpu", "H100-SXM" if "H100-SXM" in keys else (keys[0] if keys else ""))
        if not self.is_bound and "nic_gbps" not in self.initial:  # the picked GPU's NIC, not a fixed 400
            speed = self.gpu_nic_speeds.get(str(self.initial.get("gpu")))
            if speed is not None:
                self.initial["nic_gbps"] = speed
        if not self.is_bound and "layers" not in self.initial:
            for key, value in preset_form_fields(DEFAULT_PRESET).items():
                self.initial.setdefault(key, value)
        if not self.is_bound:  # cost defaults are the catalog's facility figures (as the engine uses them)
            facility = next((i.get("specs") or {} for i in items if i.get("kind") == "facility"), {})
            for name in COST_FIELDS:
                if isinstance(facility.get(name), int | float) and not isinstance(facility.get(name), bool):
                    self.initial.setdefault(name, facility[name])
        fleet = self.selected_fleet()
        if fleet is not None:  # the fleet supplies the cluster: show its values, read-only
            cluster = self.fleet_clusters.get(str(fleet.pk), {})
            for name in FLEET_CLUSTER_FIELDS:
                field = self.fields[name]
                field.disabled = True
                field.required = False
                if cluster.get(name) is not None:
                    self.initial[name] = cluster[name]
            for name in ("gpu", "nic_gbps", "fabric", "topology"):  # a fleet value the menus do not offer
                value, choice = cluster.get(name), self._choice(name)
                current = list(choice.choices)  # type: ignore[arg-type]
                if value is not None and str(value) not in {str(k) for k, _ in current}:
                    choice.choices = [*current, (value, str(value))]
        for f in self.fields.values():
            if isinstance(f.widget, forms.NumberInput):
                f.widget.attrs.setdefault("step", "any")

    # --- fleet / cluster -----------------------------------------------------------------------------
    def selected_fleet(self) -> Any:
        key = self.data.get("fleet") if self.is_bound else self.initial.get("fleet")
        return self.fleets.get(str(key)) if key not in (None, "") else None

    def _cluster_value(self, name: str) -> Any:
        """A cluster value from the picked fleet, else the cleaned, posted or initial form value."""
        fleet = self.selected_fleet()
        if fleet is not None:
            return self.fleet_clusters.get(str(fleet.pk), {}).get(name)
        cleaned = getattr(self, "cleaned_data", None)
        if cleaned is not None and name in cleaned:
            return cleaned[name]
        raw = self.data.get(name) if self.is_bound else self.initial.get(name, self.fields[name].initial)
        try:
            return float(raw) if name == "oversubscription" else int(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None

    def oversubscribed(self) -> bool:
        return (self._cluster_value("oversubscription") or 1.0) > 1.0

    def has_ranges(self) -> bool:
        """Any uncertainty input given (or in error): the ranges section starts open."""
        names = [f"{n}_{side}" for n, _p, _d in RANGE_INPUTS for side in ("low", "high")]
        names += ["server_price_low_pct", "server_price_high_pct"]
        values = self.data if self.is_bound else self.initial
        return any(values.get(n) not in (None, "", 0, 0.0) for n in names) or any(n in self.errors for n in names)

    def pod_gpus_value(self) -> int | None:
        """``cluster.pod_gpus`` as given: the form adds no default of its own (an empty pod is the engine's,
        whatever the API would get); the input shows only while the fabric is oversubscribed, so a value left in
        it at 1:1 (where a pod changes nothing) is not written."""
        if (self._cluster_value("oversubscription") or 1.0) <= 1.0:
            return None
        return self.cleaned_data.get("pod_gpus") if hasattr(self, "cleaned_data") else None

    def server_item(self) -> Mapping[str, Any] | None:
        """The catalog server the cost model prices this cluster's GPU with."""
        gpu = self._cluster_value("gpu") if self.selected_fleet() is not None else self.cleaned_data.get("gpu")
        if not gpu:
            return None
        return gpu_server_item(gpu=str(gpu), catalog=self.catalog, server=self.base_costs.get("server"))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        stored_degrees = isinstance(self.base.get("parallelism"), Mapping) and bool(self.base.get("parallelism"))
        if (data.get("par_mode") == "manual" and not any(data.get(k) for k in ("tp", "pp", "cp", "ep"))
                and not stored_degrees):
            self.add_error("tp", "Give TP and/or PP, or let the planner search the layout.")
        if data.get("moe_experts"):
            for name in MOE_REQUIRED_INPUTS:
                if not data.get(name) and name not in self.errors:
                    self.add_error(name, "Required for a mixture-of-experts model.")
        elif any(data.get(n) for n in ("moe_top_k", "moe_expert_ffn", "moe_shared_experts", "moe_dense_layers")):
            self.add_error("moe_experts", "Give the number of routed experts, or clear the MoE fields.")
        self._clean_mla(data)
        self._clean_training_formats(data)
        if data.get("preset") and data["preset"] != "custom" and data["preset"] not in PRESETS:
            self.add_error("preset", "Unknown preset.")
        pod, gpus, gpn = data.get("pod_gpus"), self._cluster_value("gpus"), self._cluster_value("gpus_per_node")
        if pod and (self._cluster_value("oversubscription") or 1.0) > 1.0:
            if gpus and pod > gpus:
                self.add_error("pod_gpus", f"At most the cluster size ({gpus:,} GPUs).")
            elif gpn and pod % gpn:
                self.add_error("pod_gpus", f"Give whole servers: a multiple of {gpn} GPUs.")
        for name, _path, default in RANGE_INPUTS:
            low, high = data.get(f"{name}_low"), data.get(f"{name}_high")
            likely = data.get(name) if data.get(name) is not None else default
            if likely is None:
                continue
            if low is not None and low > likely:
                self.add_error(f"{name}_low", f"Must not be above the likely value ({likely:g}).")
            if high is not None and high < likely:
                self.add_error(f"{name}_high", f"Must not be below the likely value ({likely:g}).")
        if (data.get("server_price_low_pct") or data.get("server_price_high_pct")) and not self.errors:
            item = self.server_item()
            if item is None or not item.get("unit_price_usd"):
                self.add_error("server_price_low_pct", "No list price for this GPU's server in the catalog.")
        return data

    def _clean_mla(self, data: Mapping[str, Any]) -> None:
        """Multi-head latent attention: the inputs of the keys model.mla requires (engine.schema) with the KV latent
        rank, and no other MLA input without it (the builder writes no ``mla`` then). Every head its own K and V:
        the engine's parser refuses other KV heads at ``model.kv_heads``, shown beside that input (PATHS)."""
        if data.get("mla_kv_lora_rank"):
            for name in MLA_REQUIRED_INPUTS:
                if not data.get(name) and name not in self.errors:
                    self.add_error(name, "Required for multi-head latent attention.")
        elif any(data.get(n) for n in MLA_FIELDS if n != "mla_kv_lora_rank"):
            self.add_error("mla_kv_lora_rank", "Give the KV latent rank, or clear the latent attention fields.")

    def _clean_training_formats(self, data: Mapping[str, Any]) -> None:
        """A recompute layer count above the model's layers, refused beside its input (the engine would only cap it
        at a pipeline chunk's). Which recompute and precision the layer count and an fp8 activation cache need, the
        engine's parser decides: its errors land beside these inputs (PATHS)."""
        layers, recompute_layers = data.get("layers"), data.get("recompute_layers")
        if recompute_layers is not None and layers and recompute_layers > layers:
            self.add_error("recompute_layers", f"At most the model's layers ({layers}).")

    # --- documents -----------------------------------------------------------------------------------
    base_costs: Mapping[str, Any] = {}
    base_uncertainty: Mapping[str, Any] = {}

    def _same_fleet(self) -> bool:
        fleet = self.selected_fleet()
        return str(fleet.pk if fleet is not None else "") == str(self.base.get("fleet_id") or "")

    def model_doc(self) -> dict[str, Any]:
        return model_section(self.cleaned_data, self.base.get("model") or {})

    def training_doc(self) -> dict[str, Any]:
        return training_section(self.cleaned_data, self.base.get("training") or {})

    def parallelism_doc(self) -> Any:
        return parallelism_section(self.cleaned_data, self.base.get("parallelism"))

    def cluster_doc(self) -> dict[str, Any]:
        """The scenario's own ``cluster``: the whole ad-hoc cluster, or only overrides on a picked fleet."""
        cluster = cluster_section(self.cleaned_data, self.base.get("cluster") or {},
                                  fleet_picked=self.selected_fleet() is not None, same_fleet=self._same_fleet())
        pod = self.pod_gpus_value()
        if pod is not None:
            cluster["pod_gpus"] = pod
        else:
            cluster.pop("pod_gpus", None)
        return cluster

    def fleet_cluster_doc(self) -> dict[str, Any]:
        """The cluster the engine sees: the fleet's (if picked) with the scenario's overrides on top."""
        fleet = self.selected_fleet()
        base = dict(self.fleet_clusters.get(str(fleet.pk), {})) if fleet is not None else {}
        return {**base, **self.cluster_doc()}

    def costs_doc(self) -> dict[str, Any]:
        """``costs``: the scenario's other cost keys kept, the builder's inputs (and their ranges) written."""
        return costs_section(self.cleaned_data, self.base_costs, server=self.server_item(), catalog=self.catalog)

    def uncertainty_doc(self) -> dict[str, Any]:
        return uncertainty_section(self.cleaned_data, self.base_uncertainty)

    def workload_name(self) -> str:
        return self.cleaned_data["model_name"]

    def document(self) -> dict[str, Any]:
        doc = {
            "name": self.cleaned_data["name"],
            "model": self.model_doc(),
            "training": self.training_doc(),
            "parallelism": self.parallelism_doc(),
            "cluster": self.fleet_cluster_doc(),
            "costs": self.costs_doc(),
        }
        if self.uncertainty_doc():
            doc["uncertainty"] = self.uncertainty_doc()
        if self._same_fleet():  # the scenario's pinned fabric study and its fleet's calibration profile
            for key in ("fabric_study", "calibration"):
                if (self.base.get("extras") or {}).get(key):
                    doc[key] = copy.deepcopy(self.base["extras"][key])
        return doc

    @classmethod
    def initial_from_document(cls, doc: Mapping[str, Any], *, name: str = "", description: str = "",
                              watched: bool = False, fleet: Any = None,
                              catalog: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
        """Form values for an existing scenario document (edit page); ranges become low/likely/high."""
        return initial_from_document(doc, name=name, description=description, watched=watched, fleet=fleet,
                                     catalog=catalog)
