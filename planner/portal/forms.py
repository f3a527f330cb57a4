"""Portal forms. They only shape HTML input into the documents the domain services take; the rules
(what a valid scenario or fleet is) live in the engine parser and the services, and their errors are mapped
back onto these fields so they show inline."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django import forms

from planner.portal.presets import DEFAULT_PRESET, PRESETS, _tidy, preset_choices, preset_form_fields

LINK_SPEEDS = [(200, "200G"), (400, "400G"), (800, "800G")]
FABRIC_CHOICES = [("infiniband", "InfiniBand"), ("roce", "Ethernet (RoCE)")]
TOPOLOGY_CHOICES = [("fat-tree", "Fat-tree"), ("rail-optimized", "Rail-optimized"), ("multi-plane", "Multi-plane")]
PRECISION_CHOICES = [("bf16", "BF16"), ("fp8", "FP8")]
RECOMPUTE_CHOICES = [("auto", "Auto"), ("none", "None"), ("selective", "Selective"), ("full", "Full")]
COST_FIELDS = ("usd_per_kwh", "pue", "depreciation_years", "avg_utilization")
PAR_MODE_CHOICES = [("auto", "Search automatically"), ("manual", "Set TP / PP")]


def _catalog_choices(items: Iterable[Mapping[str, Any]], kind: str) -> list[tuple[str, str]]:
    return sorted(((i["key"], i.get("name") or i["key"]) for i in items if i.get("kind") == kind), key=lambda c: c[1])


class FieldErrorMixin:
    """Map dotted error paths from the engine/services/serializers onto form fields."""

    def _choice(self, name: str) -> forms.ChoiceField:
        field = self.fields[name]  # type: ignore[attr-defined]
        assert isinstance(field, forms.ChoiceField)
        return field

    #: document path -> form field name
    PATHS: dict[str, str] = {}

    def add_path_errors(self, errors: Mapping[str, Any]) -> None:
        form: forms.BaseForm = self  # type: ignore[assignment]
        for path, messages in errors.items():
            if isinstance(messages, str):
                messages = [messages]
            field = self.PATHS.get(path)
            if field is None and path in form.fields:
                field = path
            if field is None:
                # nearest known ancestor path (cluster.gpus.0 -> cluster.gpus)
                parts = path.split(".")
                while parts and field is None:
                    parts.pop()
                    field = self.PATHS.get(".".join(parts))
            for msg in messages if isinstance(messages, list | tuple) else [messages]:
                text = str(msg)
                if field and field in form.fields:
                    form.add_error(field, text)
                else:
                    label = "" if path in ("detail", "non_field_errors", "__all__", "") else f"{path}: "
                    form.add_error(None, f"{label}{text}")


class ScenarioBuilderForm(FieldErrorMixin, forms.Form):
    name = forms.CharField(max_length=120)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    watched = forms.BooleanField(required=False, label="Watch: re-evaluate when prices or the engine change")

    # workload
    preset = forms.ChoiceField(choices=preset_choices, initial=DEFAULT_PRESET, label="Workload")
    model_name = forms.CharField(max_length=120, label="Model name")
    layers = forms.IntegerField(min_value=1)
    hidden = forms.IntegerField(min_value=1, label="Hidden size")
    heads = forms.IntegerField(min_value=1, label="Attention heads")
    kv_heads = forms.IntegerField(min_value=1, label="KV heads")
    ffn_hidden = forms.IntegerField(min_value=1, label="FFN hidden")
    gated_ffn = forms.BooleanField(required=False, label="Gated FFN (SwiGLU)")
    vocab = forms.IntegerField(min_value=1, label="Vocabulary")
    seq_len = forms.IntegerField(min_value=1, label="Sequence length")
    global_batch = forms.IntegerField(min_value=1, label="Global batch (sequences)")
    tokens_b = forms.FloatField(min_value=0.001, label="Training tokens (billions)")
    precision = forms.ChoiceField(choices=PRECISION_CHOICES, initial="bf16")
    recompute = forms.ChoiceField(choices=RECOMPUTE_CHOICES, initial="auto", label="Activation recompute")
    par_mode = forms.ChoiceField(choices=PAR_MODE_CHOICES, initial="auto", label="Parallelism",
                                 widget=forms.RadioSelect)
    tp = forms.IntegerField(min_value=1, required=False, label="Tensor parallel (TP)")
    pp = forms.IntegerField(min_value=1, required=False, label="Pipeline parallel (PP)")

    # cluster
    gpu = forms.ChoiceField(label="GPU generation")
    gpus = forms.IntegerField(min_value=1, initial=1024, label="Cluster size (GPUs)")
    gpus_per_node = forms.IntegerField(min_value=1, initial=8, label="GPUs per server")
    nic_gbps = forms.TypedChoiceField(choices=LINK_SPEEDS, coerce=int, initial=400, label="Link speed",
                                      widget=forms.RadioSelect)
    fabric = forms.ChoiceField(choices=FABRIC_CHOICES, initial="infiniband", widget=forms.RadioSelect)
    topology = forms.ChoiceField(choices=TOPOLOGY_CHOICES, initial="rail-optimized")
    oversubscription = forms.FloatField(min_value=1.0, initial=1.0, label="Oversubscription (down:up)",
                                        help_text="1.0 = non-blocking")

    # cost assumptions (passed through to the TCO model as the scenario's "costs")
    usd_per_kwh = forms.FloatField(min_value=0, initial=0.08, label="Electricity ($/kWh)")
    pue = forms.FloatField(min_value=1.0, initial=1.3, label="PUE")
    depreciation_years = forms.FloatField(min_value=0.1, initial=4, label="Depreciation (years)")
    avg_utilization = forms.FloatField(min_value=0.01, max_value=1.0, initial=0.8, label="Average utilization",
                                       help_text="Share of the year the cluster is busy (0–1)")

    PATHS = {
        "name": "name", "description": "description",
        "model": "model_name", "model.name": "model_name", "model.layers": "layers", "model.hidden": "hidden",
        "model.heads": "heads", "model.kv_heads": "kv_heads", "model.ffn_hidden": "ffn_hidden",
        "model.gated_ffn": "gated_ffn", "model.vocab": "vocab", "model.seq_len": "seq_len",
        "training.global_batch": "global_batch", "training.tokens": "tokens_b",
        "training.precision": "precision", "training.recompute": "recompute",
        "parallelism": "par_mode", "parallelism.tp": "tp", "parallelism.pp": "pp", "parallelism.dp": "par_mode",
        "parallelism.cp": "par_mode", "parallelism.ep": "par_mode", "parallelism.vpp": "par_mode",
        "cluster.gpu": "gpu", "cluster.gpus": "gpus", "cluster.gpus_per_node": "gpus_per_node",
        "cluster.nics_per_node": "gpus_per_node",
        "cluster.nic_gbps": "nic_gbps", "cluster.fabric": "fabric", "cluster.topology": "topology",
        "cluster.oversubscription": "oversubscription", "cluster.tiers": "topology",
        "costs.usd_per_kwh": "usd_per_kwh", "costs.pue": "pue",
        "costs.depreciation_years": "depreciation_years", "costs.avg_utilization": "avg_utilization",
    }

    def __init__(self, *args: Any, catalog_items: Iterable[Mapping[str, Any]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        items = list(catalog_items)
        gpus = _catalog_choices(items, "gpu")
        self._choice("gpu").choices = gpus or [("H100-SXM", "NVIDIA H100 SXM")]
        if not self.is_bound and not self.initial.get("gpu"):
            keys = [k for k, _ in gpus]
            self.initial.setdefault("gpu", "H100-SXM" if "H100-SXM" in keys else (keys[0] if keys else ""))
        if not self.is_bound and "layers" not in self.initial:
            for key, value in preset_form_fields(DEFAULT_PRESET).items():
                self.initial.setdefault(key, value)
        for f in self.fields.values():
            if isinstance(f.widget, forms.NumberInput):
                f.widget.attrs.setdefault("step", "any")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("par_mode") == "manual" and not (data.get("tp") or data.get("pp")):
            self.add_error("tp", "Give TP and/or PP, or let the planner search the layout.")
        if data.get("preset") and data["preset"] != "custom" and data["preset"] not in PRESETS:
            self.add_error("preset", "Unknown preset.")
        return data

    # --- documents -----------------------------------------------------------------------------------
    def model_doc(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "name": d["model_name"], "layers": d["layers"], "hidden": d["hidden"], "heads": d["heads"],
            "kv_heads": d["kv_heads"], "ffn_hidden": d["ffn_hidden"], "gated_ffn": bool(d.get("gated_ffn")),
            "vocab": d["vocab"], "seq_len": d["seq_len"],
        }

    def training_doc(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "global_batch": d["global_batch"], "tokens": float(d["tokens_b"]) * 1e9,
            "precision": d["precision"], "recompute": d["recompute"], "micro_batch": "auto", "zero": "auto",
        }

    def parallelism_doc(self) -> Any:
        d = self.cleaned_data
        if d.get("par_mode") != "manual":
            return "auto"
        return {"tp": d.get("tp") or 1, "pp": d.get("pp") or 1, "cp": 1, "ep": 1, "vpp": "auto",
                "sequence_parallel": "auto"}

    def cluster_doc(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "gpu": d["gpu"], "gpus": d["gpus"], "gpus_per_node": d["gpus_per_node"],
            "nics_per_node": d["gpus_per_node"], "nic_gbps": d["nic_gbps"], "fabric": d["fabric"],
            "topology": d["topology"], "oversubscription": d["oversubscription"],
        }

    def costs_doc(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {k: d[k] for k in COST_FIELDS if d.get(k) is not None}

    def workload_name(self) -> str:
        return self.cleaned_data["model_name"]

    def document(self) -> dict[str, Any]:
        return {
            "name": self.cleaned_data["name"],
            "model": self.model_doc(),
            "training": self.training_doc(),
            "parallelism": self.parallelism_doc(),
            "cluster": self.cluster_doc(),
            "costs": self.costs_doc(),
        }

    @classmethod
    def initial_from_document(cls, doc: Mapping[str, Any], *, name: str = "", description: str = "",
                              watched: bool = False) -> dict[str, Any]:
        """Form values for an existing scenario document (edit page)."""
        m = doc.get("model", {}) or {}
        t = doc.get("training", {}) or {}
        p = doc.get("parallelism", "auto")
        c = doc.get("cluster", {}) or {}
        costs = doc.get("costs", {}) or {}
        initial: dict[str, Any] = {
            "name": name or doc.get("name", ""), "description": description, "watched": watched,
            "preset": "custom",
            "model_name": m.get("name", ""), "layers": m.get("layers"), "hidden": m.get("hidden"),
            "heads": m.get("heads"), "kv_heads": m.get("kv_heads", m.get("heads")),
            "ffn_hidden": m.get("ffn_hidden"), "gated_ffn": m.get("gated_ffn", False), "vocab": m.get("vocab"),
            "seq_len": m.get("seq_len"), "global_batch": t.get("global_batch"),
            "tokens_b": _tidy(float(t["tokens"]) / 1e9) if isinstance(t.get("tokens"), int | float) else None,
            "precision": t.get("precision", "bf16"), "recompute": t.get("recompute", "auto"),
            "gpu": c.get("gpu"), "gpus": c.get("gpus"), "gpus_per_node": c.get("gpus_per_node", 8),
            "nic_gbps": int(c.get("nic_gbps", 400)), "fabric": c.get("fabric", "infiniband"),
            "topology": c.get("topology", "fat-tree"), "oversubscription": c.get("oversubscription", 1.0),
        }
        for key in COST_FIELDS:
            if isinstance(costs.get(key), int | float):
                initial[key] = costs[key]
        for key, preset in PRESETS.items():
            if preset["model"] == {k: m.get(k) for k in preset["model"]}:
                initial["preset"] = key
                break
        if isinstance(p, Mapping) and any(p.get(k) not in (None, "auto", 1) for k in ("tp", "pp")):
            initial.update(par_mode="manual", tp=p.get("tp") if p.get("tp") != "auto" else None,
                           pp=p.get("pp") if p.get("pp") != "auto" else None)
        else:
            initial["par_mode"] = "auto"
        return {k: v for k, v in initial.items() if v is not None}


class FleetForm(FieldErrorMixin, forms.Form):
    name = forms.CharField(max_length=120)
    site = forms.CharField(max_length=120, required=False)
    server_model = forms.ChoiceField(label="Server model")
    server_count = forms.IntegerField(min_value=1, label="Servers")
    gpus_per_node = forms.IntegerField(min_value=1, initial=8, label="GPUs per server")
    nics_per_node = forms.IntegerField(min_value=1, initial=8, label="NICs per server")
    nic_gbps = forms.TypedChoiceField(choices=LINK_SPEEDS, coerce=int, initial=400, label="Link speed")
    fabric = forms.ChoiceField(choices=FABRIC_CHOICES, initial="infiniband")
    topology = forms.ChoiceField(choices=TOPOLOGY_CHOICES, initial="fat-tree")
    oversubscription = forms.FloatField(min_value=1.0, initial=1.0)
    in_service_date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}),
                                      label="In service from")
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))

    FIELDS = ("name", "site", "server_model", "server_count", "gpus_per_node", "nics_per_node", "nic_gbps",
              "fabric", "topology", "oversubscription", "in_service_date", "notes")

    def __init__(self, *args: Any, catalog_items: Iterable[Mapping[str, Any]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        servers = _catalog_choices(catalog_items, "server")
        current = self.initial.get("server_model")
        if current and current not in dict(servers):
            servers.append((current, current))
        self._choice("server_model").choices = servers or [("HGX-H100", "HGX H100 8-GPU server")]
        for f in self.fields.values():
            if isinstance(f.widget, forms.NumberInput):
                f.widget.attrs.setdefault("step", "any")

    def data_for_service(self) -> dict[str, Any]:
        return {k: self.cleaned_data.get(k) for k in self.FIELDS}


class SweepForm(FieldErrorMixin, forms.Form):
    name = forms.CharField(max_length=120, required=False)
    nic_gbps = forms.TypedMultipleChoiceField(choices=LINK_SPEEDS, coerce=int, required=False,
                                              widget=forms.CheckboxSelectMultiple, label="Link speeds")
    fabric = forms.MultipleChoiceField(choices=FABRIC_CHOICES, required=False,
                                       widget=forms.CheckboxSelectMultiple, label="Fabrics")
    gpu = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label="GPU generations")
    gpus = forms.CharField(required=False, label="Cluster sizes (GPUs)",
                           help_text="Comma-separated, e.g. 1024, 2048, 4096")
    oversubscription = forms.CharField(required=False, label="Oversubscription ratios",
                                       help_text="Comma-separated, e.g. 1, 2")
    uncertainty = forms.BooleanField(required=False, initial=True,
                                     label="Include uncertainty (Monte Carlo P10/P50/P90 and sensitivity)")

    MONTE_CARLO_SAMPLES = 2000

    def params(self) -> dict[str, Any]:
        if self.cleaned_data.get("uncertainty"):
            return {"monte_carlo": self.MONTE_CARLO_SAMPLES, "sensitivity": True}
        return {}

    PATHS = {
        "axes.cluster.nic_gbps": "nic_gbps", "axes.cluster.fabric": "fabric", "axes.cluster.gpu": "gpu",
        "axes.cluster.gpus": "gpus", "axes.cluster.oversubscription": "oversubscription",
        "cluster.nic_gbps": "nic_gbps", "cluster.fabric": "fabric", "cluster.gpu": "gpu", "cluster.gpus": "gpus",
        "cluster.oversubscription": "oversubscription", "axes": None,  # type: ignore[dict-item]
    }

    def __init__(self, *args: Any, catalog_items: Iterable[Mapping[str, Any]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._choice("gpu").choices = _catalog_choices(catalog_items, "gpu")
        self.PATHS = {k: v for k, v in self.PATHS.items() if v}

    @staticmethod
    def _numbers(raw: str, field: str, cast: Any) -> list[Any]:
        out = []
        for part in (raw or "").replace(";", ",").split(","):
            part = part.strip()
            if not part:
                continue
            try:
                value = cast(part)
            except ValueError:
                raise forms.ValidationError(f"{part!r} is not a number.", code="invalid") from None
            out.append(value)
        return out

    def clean_gpus(self) -> list[int]:
        return self._numbers(self.cleaned_data.get("gpus", ""), "gpus", int)

    def clean_oversubscription(self) -> list[float]:
        return self._numbers(self.cleaned_data.get("oversubscription", ""), "oversubscription", float)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.errors and not self.axes():
            raise forms.ValidationError("Pick at least one value on at least one axis to sweep.")
        return data

    def axes(self) -> dict[str, list[Any]]:
        d = getattr(self, "cleaned_data", {})
        axes: dict[str, list[Any]] = {}
        for field, path in (("nic_gbps", "cluster.nic_gbps"), ("fabric", "cluster.fabric"), ("gpu", "cluster.gpu"),
                            ("gpus", "cluster.gpus"), ("oversubscription", "cluster.oversubscription")):
            values = d.get(field) or []
            if values:
                axes[path] = list(values)
        return axes
