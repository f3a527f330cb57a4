"""Cross-field checks of a parsed scenario's parallel degrees (the one parser calls :func:`check_layout`).

Degrees that are given are checked against the model and the cluster here, with an error naming the field;
degrees left to the search are checked by the search. A degree given as a list of allowed values has each
value checked as if it were given.
"""

from __future__ import annotations

import math

from engine.errors import LAYOUT_CONFLICT, ScenarioError
from engine.schema.enums import RecomputeModule
from engine.schema.types import ScenarioSpec


def _degree_problem(s: ScenarioSpec, key: str, v: int) -> str | None:
    """Why ``v`` cannot be the ``key`` degree of this scenario whatever the other degrees (None if it can)."""
    m, c = s.model, s.cluster
    if c.gpus % v and key in ("tp", "pp", "cp", "ep"):
        return f"does not divide cluster.gpus={c.gpus}"
    if key == "tp" and m.heads % v:
        return f"does not divide model.heads={m.heads}"
    if key == "pp" and v > m.layers:
        return f"exceeds model.layers={m.layers}"
    if key == "cp" and m.seq_len % v:
        return f"does not divide model.seq_len={m.seq_len}"
    if key == "ep" and v > 1 and m.moe is None:
        return "needs a mixture-of-experts model (model.moe)"
    if key == "ep" and m.moe is not None and m.moe.experts % v:
        return f"does not divide model.moe.experts={m.moe.experts}"
    if key == "vpp" and v > s.parallelism.pipeline_slots(m.layers):
        return f"exceeds {_places(s)}"
    return None


def _places(s: ScenarioSpec) -> str:
    """What pp * vpp may reach, in words: the layers, + 2 with the embedding and the loss in the split."""
    layers = s.model.layers
    if s.parallelism.embedding_loss_in_split:
        return f"model.layers + 2 = {layers + 2} (parallelism.embedding_loss_in_split)"
    return f"model.layers={layers}"


def check_layout(s: ScenarioSpec) -> None:
    """Cross-field checks for degrees that are given (auto ones are checked by the search)."""
    m, t, p, c = s.model, s.training, s.parallelism, s.cluster
    if p.tp is not None and m.heads % p.tp:
        raise ScenarioError("parallelism.tp", f"{p.tp} does not divide model.heads={m.heads}", LAYOUT_CONFLICT)
    if p.pp is not None and p.pp > m.layers:
        raise ScenarioError("parallelism.pp", f"{p.pp} exceeds model.layers={m.layers}", LAYOUT_CONFLICT)
    if p.cp is not None and m.seq_len % p.cp:
        raise ScenarioError("parallelism.cp", f"{p.cp} does not divide model.seq_len={m.seq_len}", LAYOUT_CONFLICT)
    if p.vpp is not None and p.pp is not None:
        if p.vpp > 1 and p.pp == 1:
            raise ScenarioError("parallelism.vpp", "interleaving (vpp > 1) needs parallelism.pp > 1", LAYOUT_CONFLICT)
        if p.pp * p.vpp > p.pipeline_slots(m.layers):
            raise ScenarioError("parallelism.vpp", f"pp*vpp={p.pp * p.vpp} exceeds {_places(s)}", LAYOUT_CONFLICT)
    _check_split(s)
    if p.ep is not None and p.ep > 1:
        if m.moe is None:
            raise ScenarioError("parallelism.ep", f"{p.ep} needs a mixture-of-experts model (model.moe)", LAYOUT_CONFLICT)
        if m.moe.experts % p.ep:
            raise ScenarioError("parallelism.ep", f"{p.ep} does not divide model.moe.experts={m.moe.experts}", LAYOUT_CONFLICT)
    _check_etp(s)
    if RecomputeModule.MLA_UP_PROJ in (t.recompute_modules or ()) and m.mla is None:
        raise ScenarioError("training.recompute_modules", "mla_up_proj needs multi-head latent attention (model.mla)",
                            LAYOUT_CONFLICT)
    for key, values in p.choices:  # each allowed value must be one the degree can take
        for v in values:
            problem = _degree_problem(s, key, v)
            if problem:
                raise ScenarioError(f"parallelism.{key}", f"{v} {problem}", LAYOUT_CONFLICT)
    fixed = [v for v in (p.tp, p.pp, p.cp) if v is not None]
    prod = math.prod(fixed)
    if c.gpus % prod:
        raise ScenarioError("parallelism", f"tp*pp*cp={prod} does not divide cluster.gpus={c.gpus}", LAYOUT_CONFLICT)
    if p.tp is not None and p.pp is not None and p.cp is not None:
        if p.dp is not None and p.tp * p.pp * p.dp * p.cp != c.gpus:
            raise ScenarioError(
                "parallelism.dp",
                f"tp*pp*dp*cp={p.tp * p.pp * p.dp * p.cp} != cluster.gpus={c.gpus}", LAYOUT_CONFLICT)
        dp = p.dp if p.dp is not None else c.gpus // prod
        if p.etp is not None:  # MoE parallel folding: EP folds over the attention's t c d ranks
            _check_folding(p.tp * p.cp * dp, p.etp, p.ep)
        elif p.ep is not None and p.ep > 1 and (dp * p.cp) % p.ep:
            raise ScenarioError("parallelism.ep", f"{p.ep} does not divide dp*cp={dp * p.cp}", LAYOUT_CONFLICT)
        if t.global_batch % dp:
            raise ScenarioError("training.global_batch", f"{t.global_batch} is not divisible by dp={dp}", LAYOUT_CONFLICT)
        if t.micro_batch is not None and t.global_batch % (dp * t.micro_batch):
            raise ScenarioError(
                "training.global_batch",
                f"{t.global_batch} is not divisible by dp*micro_batch={dp * t.micro_batch}", LAYOUT_CONFLICT)
    elif p.dp is not None and t.global_batch % p.dp:
        raise ScenarioError("training.global_batch", f"{t.global_batch} is not divisible by dp={p.dp}", LAYOUT_CONFLICT)


def _check_split(s: ScenarioSpec) -> None:
    """With the embedding and the loss in the pipeline split, Megatron-Core divides the L + 2 places into whole
    stages and whole chunks (transformer_block.py asserts both): a given pp (and vpp) must divide them."""
    p, places = s.parallelism, s.parallelism.pipeline_slots(s.model.layers)
    if not p.embedding_loss_in_split or p.pp is None or p.pp == 1:
        return
    if places % p.pp:
        raise ScenarioError("parallelism.embedding_loss_in_split", f"model.layers + 2 = {places} places do not "
                            f"split into pp={p.pp} whole stages", LAYOUT_CONFLICT)
    if p.vpp is not None and (places // p.pp) % p.vpp:
        raise ScenarioError("parallelism.embedding_loss_in_split", f"{places // p.pp} places per stage do not split "
                            f"into vpp={p.vpp} whole chunks", LAYOUT_CONFLICT)


def _check_etp(s: ScenarioSpec) -> None:
    """``parallelism.etp`` (MoE parallel folding) on its own: experts to shard (model.moe), an expert FFN width and
    a GPU count it divides. Like tp, it is not bounded by the NVLink domain."""
    m, p, c = s.model, s.parallelism, s.cluster
    if p.etp is None:
        return
    if m.moe is None:
        raise ScenarioError("parallelism.etp", f"{p.etp} needs a mixture-of-experts model (model.moe): expert "
                            "tensor parallelism shards the routed experts", LAYOUT_CONFLICT)
    if m.moe.expert_ffn_hidden % p.etp:
        raise ScenarioError("parallelism.etp", f"{p.etp} does not divide model.moe.expert_ffn_hidden="
                            f"{m.moe.expert_ffn_hidden}", LAYOUT_CONFLICT)
    if c.gpus % p.etp:
        raise ScenarioError("parallelism.etp", f"{p.etp} does not divide cluster.gpus={c.gpus}", LAYOUT_CONFLICT)


def _check_folding(tcd: int, etp: int, ep: int | None) -> None:
    """MoE parallel folding (Megatron-Core, arXiv 2504.14960): the expert grid etp x ep x edp covers the attention's
    tp x cp x dp ranks of a pipeline stage, so etp * ep divides tp * cp * dp (ep searched: etp alone must)."""
    if tcd % (etp * (ep or 1)):
        what = f"etp*ep={etp * ep}" if ep is not None else f"{etp}"
        raise ScenarioError("parallelism.etp", f"{what} does not divide tp*cp*dp={tcd}: the experts' etp x ep x "
                            "edp grid folds over the attention's tp x cp x dp ranks", LAYOUT_CONFLICT)
