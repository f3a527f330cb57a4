"""The scenario builder's engine-document sections: what the form shows, written over what it does not.

Editing a scenario in the builder must never drop a setting the builder has no input for (a scenario made
over the API with ``training.attention``, ``cluster.tiers`` or a pinned fabric study): each section starts
from the scenario's stored one (``base``) and the form writes only its own keys. Stored keys that a form
change makes meaningless go with that change (``head_dim`` when the architecture changes, the switch and NIC
models when the fabric or link speed changes, the tier count when the cluster's size or topology changes,
the queue-pair count when the routing changes). Values are the engine's; the engine validates the result.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from engine.schema.enums import ActivationCache, Precision, RankAssignment, Recompute
from engine.schema.fields import keys, required
from portal.forms.common import FLEET_CLUSTER_FIELDS
from portal.presets import MLA_PRESET_FIELDS, MOE_PRESET_FIELDS

#: optional training inputs, each written only when given (its form field has the key's name); empty = not written
OPTIONAL_TRAINING = ("recompute_layers", "activation_cache", "optimizer_moments", "cp_comm_type")
#: training keys the builder has inputs for (written by training_section)
FORM_TRAINING = ("global_batch", "tokens", "precision", "recompute", "framework", "moe_dispatcher",
                 *OPTIONAL_TRAINING)
#: training keys the builder has no input for, kept from the stored scenario: every other key of the schema
KEPT_TRAINING = tuple(sorted(k for k in keys("training") if k not in FORM_TRAINING))
#: parallelism keys the manual mode has no input for, kept from the stored scenario ("dp" only when "auto":
#: a number is derived from the cluster size, which the form may have changed); vpp, etp and
#: embedding_loss_in_split only for a caller without their inputs (given, the input decides)
KEPT_PARALLELISM = ("vpp", "sequence_parallel", "etp", "dp_placement", "embedding_loss_in_split")
#: the degrees the manual mode shows
DEGREES = ("tp", "pp", "cp", "ep")
MOE_FIELDS = MOE_PRESET_FIELDS  # form field -> model.moe key
MLA_FIELDS = MLA_PRESET_FIELDS  # form field -> model.mla key
#: the inputs of the keys the engine's schema requires in model.moe / model.mla (refused empty beside them)
MOE_REQUIRED_INPUTS = tuple(name for name, key in MOE_FIELDS.items() if key in required("model.moe"))
MLA_REQUIRED_INPUTS = tuple(name for name, key in MLA_FIELDS.items() if key in required("model.mla"))


def _mapping(value: Any) -> dict[str, Any]:
    return copy.deepcopy(dict(value)) if isinstance(value, Mapping) else {}


#: optional model inputs, each written only when given (its form field has the key's name); empty = not written
OPTIONAL_MODEL = ("attention_window", "global_attention_every", "mtp_layers")
#: model keys the builder writes (head_dim, mla and moe by their own rules in model_section)
FORM_MODEL = ("name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "gated_ffn", "parallel_block", "vocab",
              "seq_len", "head_dim", "mla", "moe", *OPTIONAL_MODEL)
#: model keys the builder has no input for, kept from the stored scenario (e.g. attention_window)
KEPT_MODEL = tuple(sorted(k for k in keys("model") if k not in FORM_MODEL))


def model_section(d: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """``model``: the form's architecture, MoE and multi-head latent attention (``mla``) inputs; ``head_dim`` kept
    while hidden and heads are (and no ``mla`` is written: the engine refuses the two together). Without any MLA
    input in ``d`` (a caller that has none), a stored ``mla`` is kept like ``head_dim``."""
    model: dict[str, Any] = {
        "name": d["model_name"], "layers": d["layers"], "hidden": d["hidden"], "heads": d["heads"],
        "kv_heads": d["kv_heads"], "ffn_hidden": d["ffn_hidden"], "gated_ffn": bool(d.get("gated_ffn")),
        "vocab": d["vocab"], "seq_len": d["seq_len"],
    }
    if d.get("parallel_block"):  # written only when set, as the canonical document does
        model["parallel_block"] = True
    model.update({k: copy.deepcopy(base[k]) for k in KEPT_MODEL if k in base})
    for name in OPTIONAL_MODEL:  # as OPTIONAL_TRAINING: no input given keeps the stored value, empty removes it
        if name not in d:
            if base.get(name) is not None:
                model[name] = copy.deepcopy(base[name])
        elif d[name] not in (None, ""):
            model[name] = d[name]
    same_heads = (base.get("hidden"), base.get("heads")) == (d["hidden"], d["heads"])
    inputs = "mla_kv_lora_rank" in d  # the form's MLA inputs (their initial values are the stored ones)
    for key in ("head_dim", "mla") if not inputs else ("head_dim",):  # kept while hidden and heads are
        if key in base and same_heads:
            model[key] = copy.deepcopy(base[key])
    mla = mla_section(d) if inputs else {}
    if mla:
        model["mla"] = mla
        model.pop("head_dim", None)  # latent attention has its own head widths
    moe = moe_section(d)
    if moe:
        model["moe"] = moe
    return model


def moe_section(d: Mapping[str, Any]) -> dict[str, Any]:
    """``model.moe`` from the MoE inputs; empty (a dense model) when no expert count is given."""
    if not d.get("moe_experts"):
        return {}
    moe = {"experts": d["moe_experts"], "top_k": d.get("moe_top_k"), "expert_ffn_hidden": d.get("moe_expert_ffn")}
    if d.get("moe_shared_experts"):
        moe["shared_experts"] = d["moe_shared_experts"]
    if d.get("moe_dense_layers"):
        moe["dense_layers"] = d["moe_dense_layers"]
        if d.get("moe_dense_ffn"):
            moe["dense_ffn_hidden"] = d["moe_dense_ffn"]
    return moe


def mla_section(d: Mapping[str, Any]) -> dict[str, Any]:
    """``model.mla`` from the multi-head latent attention inputs; empty (standard attention) when no KV latent rank
    is given. An empty or 0 query latent rank (no query compression, the engine's default) is not written."""
    if not d.get("mla_kv_lora_rank"):
        return {}
    mla = {key: d.get(field) for field, key in MLA_FIELDS.items() if key != "q_lora_rank"}
    if d.get("mla_q_lora_rank"):
        mla["q_lora_rank"] = d["mla_q_lora_rank"]
    return mla


def training_section(d: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """``training``: the form's inputs over the stored keys it does not show; ``auto`` choices not written."""
    training = {k: copy.deepcopy(base[k]) for k in KEPT_TRAINING if k in base}
    training.update({
        "global_batch": d["global_batch"], "tokens": float(d["tokens_b"]) * 1e9,
        "precision": d["precision"], "recompute": d["recompute"],
    })
    training.setdefault("micro_batch", "auto")
    training.setdefault("zero", "auto")
    for name in ("framework", "moe_dispatcher"):
        if d.get(name) not in (None, "", "auto"):
            training[name] = d[name]
    for name in OPTIONAL_TRAINING:
        if name not in d:  # no such input given: the stored value stays (dropped below if made meaningless)
            if base.get(name) is not None:
                training[name] = copy.deepcopy(base[name])
        elif d[name] not in (None, ""):  # the form's input (its initial value is the stored one): empty = none
            training[name] = d[name]
    # only a stored value kept without its input: no input to show the engine's refusal beside (a given one: PATHS)
    if "recompute_layers" not in d and training["recompute"] != Recompute.FULL:
        training.pop("recompute_layers", None)
    if ("activation_cache" not in d and training["precision"] == Precision.BF16
            and training.get("activation_cache") == ActivationCache.FP8):
        training.pop("activation_cache")
    return training


def parallelism_section(d: Mapping[str, Any], base: Any) -> Any:
    """``parallelism``: ``"auto"`` (search everything), or the degrees given. A degree left empty is 1, or what
    the stored scenario searched (``"auto"`` or a list of allowed values): an untouched edit keeps it as it was.
    The interleaved pipeline degree (``vpp``) left empty is searched (``"auto"``), or keeps the stored list."""
    if d.get("par_mode") != "manual":
        return "auto"
    stored = _mapping(base)
    out: dict[str, Any] = {k: stored[k] for k in KEPT_PARALLELISM if k in stored}
    if stored.get("dp") == "auto":
        out["dp"] = "auto"
    for name in DEGREES:
        value, kept = d.get(name), stored.get(name)
        # empty: the stored search ("auto", or a list of allowed values) stays; else 1
        out[name] = value if value else (copy.deepcopy(kept) if kept == "auto" or isinstance(kept, list) else 1)
    if "vpp" in d:  # the form's input (its initial value is the stored one): empty = searched, or the stored list
        kept = stored.get("vpp")
        out["vpp"] = d["vpp"] if d["vpp"] else (copy.deepcopy(kept) if isinstance(kept, list) else "auto")
    if "etp" in d:  # the form's input (its initial value is the stored one): empty = none
        out.pop("etp", None)
        if d["etp"]:
            out["etp"] = d["etp"]
    if "embedding_loss_in_split" in d:  # the form's box (its initial value is the stored one): unticked = none
        out.pop("embedding_loss_in_split", None)
        if d["embedding_loss_in_split"]:
            out["embedding_loss_in_split"] = True
    if not d.get("moe_experts"):
        out["ep"] = 1  # expert parallelism needs experts
        out.pop("etp", None)  # and so does expert tensor parallelism
    out.setdefault("vpp", "auto")
    out.setdefault("sequence_parallel", "auto")
    return out


def cluster_section(d: Mapping[str, Any], base: Mapping[str, Any], *, fleet_picked: bool,
                    same_fleet: bool) -> dict[str, Any]:
    """The scenario's own ``cluster``: the whole ad-hoc cluster, or overrides on a picked fleet (without the
    fields the fleet supplies). Stored extras travel only while the fleet choice is unchanged."""
    stored = _mapping(base) if same_fleet else {}
    if fleet_picked:
        cluster = {k: v for k, v in stored.items() if k not in FLEET_CLUSTER_FIELDS and k != "pod_gpus"}
    else:
        cluster = {k: v for k, v in stored.items() if k in ("tiers", "switch", "nic", "qps_per_connection",
                                                              "in_network_reduction", "routing")}
        shown = {
            "gpu": d["gpu"], "gpus": d["gpus"], "gpus_per_node": d["gpus_per_node"],
            "nics_per_node": d.get("nics_per_node") or d["gpus_per_node"], "nic_gbps": d["nic_gbps"],
            "fabric": d["fabric"], "topology": d["topology"], "oversubscription": d["oversubscription"],
        }
        if any(stored.get(k) != shown[k] for k in ("fabric", "nic_gbps")):
            for k in ("switch", "nic", "in_network_reduction"):
                cluster.pop(k, None)
        if any(stored.get(k) != shown[k] for k in ("gpus", "gpus_per_node", "topology")):
            cluster.pop("tiers", None)
        if d.get("gpus_per_rack"):  # the form's input (its initial value is the stored one)
            cluster["gpus_per_rack"] = d["gpus_per_rack"]
        elif ("gpus_per_rack" not in d and stored.get("gpus_per_rack") is not None
              and all(stored.get(k) == shown[k] for k in ("gpu", "gpus_per_node"))):
            cluster["gpus_per_rack"] = stored["gpus_per_rack"]  # no input given: kept while the racks are the same
        cluster.update(shown)
    assignment = d.get("rank_assignment") or ""
    if assignment and assignment != RankAssignment.UNALIGNED:
        cluster["rank_assignment"] = assignment
    else:
        cluster.pop("rank_assignment", None)
    routing = d.get("routing") or ""
    if routing != (stored.get("routing") or ""):
        cluster.pop("qps_per_connection", None)
    if routing:
        cluster["routing"] = routing
    else:
        cluster.pop("routing", None)
    return cluster


def initial_values(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Form values of the inputs this module adds (MoE, MLA, framework, dispatcher, training formats, degrees, the
    interleaved pipeline degree and the pipeline split, NICs, routing)."""
    m = _mapping(doc.get("model"))
    t = _mapping(doc.get("training"))
    p = doc.get("parallelism", "auto")
    c = _mapping(doc.get("cluster"))
    out: dict[str, Any] = {
        "framework": t.get("framework") or "auto", "moe_dispatcher": t.get("moe_dispatcher") or "auto",
        "routing": c.get("routing") or "",
        "rank_assignment": c.get("rank_assignment") or RankAssignment.UNALIGNED,
        **{name: t[name] for name in OPTIONAL_TRAINING if t.get(name) is not None},
        **{name: m[name] for name in OPTIONAL_MODEL if m.get(name) is not None},
    }
    moe = _mapping(m.get("moe"))
    for field, key in MOE_FIELDS.items():
        if isinstance(moe.get(key), int):
            out[field] = moe[key]
    mla = _mapping(m.get("mla"))
    for field, key in MLA_FIELDS.items():
        if isinstance(mla.get(key), int) and not isinstance(mla.get(key), bool):
            out[field] = mla[key]
    nics, gpn = c.get("nics_per_node"), c.get("gpus_per_node", 8)
    if isinstance(nics, int) and nics != gpn:
        out["nics_per_node"] = nics
    if isinstance(c.get("gpus_per_rack"), int):
        out["gpus_per_rack"] = c["gpus_per_rack"]
    if isinstance(p, Mapping) and p:
        out["par_mode"] = "manual"
        for name in (*DEGREES, "vpp", "etp"):
            if isinstance(p.get(name), int):
                out[name] = p[name]
        out["embedding_loss_in_split"] = p.get("embedding_loss_in_split") is True
    else:
        out["par_mode"] = "auto"
    return out
