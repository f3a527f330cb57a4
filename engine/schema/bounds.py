"""Every number of the scenario document has a type and a physical bound: this table is the one place.

The scenario parser (:mod:`.scenario`), the cost model (:mod:`.tco`), ranges (:mod:`.uncertainty`) and the
services that validate run parameters and sweep axes all check numbers through :func:`check_field` (or the
lower-level :func:`check_int` / :func:`check_number`), so that

* integers are integers: no ``bool``, no string, no float that is not integral (``8.0`` is accepted as 8, JSON
  has one number type), and no value so large that it cannot be a count of anything;
* every number is finite (no NaN, no infinity, no ``1e308`` GPUs);
* every number lies within a *physical* bound — generous (tens to thousands of times beyond anything built
  or announced), but small enough that the enumeration it drives (divisors, layouts, Monte Carlo samples) is
  bounded before it starts.

A refused value raises :class:`BoundError` (a :class:`ScenarioError`) whose ``field`` is the dotted path and
whose message names the bound: ``"cluster.gpus: must be an integer between 1 and 1,048,576 (larger than any
announced cluster), got 1e+308"``.

Work that is enumerated from the inputs (candidate layouts, Monte Carlo samples, performance points, sweep
runs) is checked against the budgets at the bottom with :func:`check_work` *before* it is allocated; exceeding
one raises :class:`WorkLimitError` naming what would be enumerated, how many, and the limit.

Pure Python, no Django, no numpy required (arrays are accepted duck-typed by :func:`check_samples`).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from engine.errors import OUT_OF_RANGE, WORK_LIMIT, WRONG_TYPE, ScenarioError

Kind = Literal["int", "float"]


class BoundError(ScenarioError):
    """A number of the wrong type (code ``wrong_type``), not finite, or outside its physical bound
    (``out_of_range``)."""

    default_code = OUT_OF_RANGE


class WorkLimitError(ScenarioError):
    """The inputs would enumerate more work (layouts, samples, runs) than the budget allows."""

    default_code = WORK_LIMIT


@dataclass(frozen=True)
class Bound:
    """Type and closed interval ``[lo, hi]`` of one field (``lo_open``: the lower end is excluded, ``> lo``)."""

    kind: Kind
    lo: float
    hi: float
    reason: str
    lo_open: bool = False

    def describe(self) -> str:
        """``"an integer between 1 and 1,048,576 (larger than any announced cluster)"``."""
        return _span(self.kind, self.lo, self.hi, self.lo_open, self.reason)

    def range_text(self) -> str:
        """The interval alone, for tables: ``1-1,048,576``, or ``> 0, <= 1e+16`` when the lower end is open."""
        if self.lo_open:
            return f"> {_fmt(self.lo)}, <= {_fmt(self.hi)}"
        return f"{_fmt(self.lo)}-{_fmt(self.hi)}"


def _fmt(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:g}"


def _int_bound(lo: int, hi: int, reason: str) -> Bound:
    return Bound("int", float(lo), float(hi), reason)


def _float_bound(lo: float, hi: float, reason: str, lo_open: bool = False) -> Bound:
    return Bound("float", float(lo), float(hi), reason, lo_open)


# ------------------------------------------------------------------------------------------------ limits
# Physical ceilings, each with its reasoning. "Announced" figures as of 2025: xAI Colossus ~200k GPUs, Meta and
# OpenAI sites planned at ~1M GPUs; NVIDIA Rubin Ultra NVL576 is the largest announced NVLink domain; the largest
# published dense models are ~100-130 layers (GPT-3 96, PaLM 118, Llama 3.1 405B 126) with widths <= 25,600
# and FFN widths <= 73,728 (PaLM 540B); the longest announced context is 10M tokens (Llama 4 Scout); the largest
# published training runs are ~36T tokens (Qwen3). ConnectX-9 / 1.6T NICs are the fastest announced.
MAX_GPUS = 1 << 20  # 1,048,576: larger than any announced cluster (~1M-GPU sites are the largest planned)
MAX_NVLINK_DOMAIN = 576  # Rubin Ultra NVL576, the largest announced scale-up domain
MAX_LAYERS = 10_000  # ~80x the deepest published LLM (126 layers)
MAX_WIDTH = 1 << 20  # 1,048,576: ~40x the widest published model (25,600)
MAX_FFN = 1 << 22  # 4,194,304: ~60x the widest published FFN (73,728)
MAX_HEADS = 1 << 16  # 65,536: published models use <= 128 query heads
MAX_VOCAB = 1 << 24  # 16,777,216: ~64x the largest published vocabularies (256k)
MAX_SEQ_LEN = 1 << 24  # 16,777,216 tokens: longer than any announced context (10M)
MAX_MTP_LAYERS = 16  # 16x the multi-token-prediction depth published models train with (DeepSeek-V3, GLM-4.5: 1)
MAX_EXPERTS = 1 << 16  # 65,536: published MoE models use <= 256 routed experts (DeepSeek-V3)
MAX_GLOBAL_BATCH = 1 << 24  # 16,777,216 sequences: ~1000x the largest published batches (~16k sequences)
MAX_MICRO_BATCH = 1 << 16  # 65,536 sequences per micro-batch per rank: far beyond any GPU's memory
MAX_TOKENS = 1e16  # ~300x the largest published training run (~36T tokens)
MAX_NIC_GBPS = 3200.0  # 2x the fastest announced NIC (1.6 Tb/s ConnectX-9 class)
MAX_OVERSUBSCRIPTION = 64.0  # a 64-port switch cannot be oversubscribed beyond 63:1
MAX_USD = 1e12  # one trillion USD: more than the capex of any announced AI build-out in one line
MAX_UNIT_PRICE_USD = 1e9  # per catalog item; the most expensive unit (an NVL72 rack) is ~4e6
MAX_SEED = (1 << 31) - 1  # numpy accepts larger seeds, but 31 bits keep seeds portable (JSON, SQL int)
MAX_MONTE_CARLO_SAMPLES = 100_000  # P10/P50/P90 converge to <1% far below this; ~1 s of vectorized pricing
MAX_TOP_K = 50  # alternatives returned by a layout search
MAX_STUDY_SEEDS = 1000  # seeds of one flow-level simulation: its P10/P50/P90 converge far below this
MAX_RUN_SEEDS = 100  # seeds of one fabric-study run: it must finish inside the worker's soft time limit
# queue pairs per NCCL connection: a scenario's cluster.qps_per_connection, a fabric study's variants (run
# params.qps, the flow simulator's qps) and a pinned study's rows are the same quantity with one bound
QPS_BOUND = _int_bound(1, 128, "NCCL_IB_QPS_PER_CONNECTION accepts at most 128")

BOUNDS: dict[str, Bound] = {
    # ---- model
    "model.layers": _int_bound(1, MAX_LAYERS, "~80x the deepest published model, 126 layers"),
    "model.hidden": _int_bound(1, MAX_WIDTH, "~40x the widest published model, 25,600"),
    "model.heads": _int_bound(1, MAX_HEADS, "published models use at most 128 query heads"),
    "model.kv_heads": _int_bound(1, MAX_HEADS, "at most model.heads; published models use <= 128"),
    "model.head_dim": _int_bound(1, MAX_WIDTH, "at most the widest model bound"),
    "model.ffn_hidden": _int_bound(1, MAX_FFN, "~60x the widest published FFN, 73,728"),
    "model.vocab": _int_bound(1, MAX_VOCAB, "~64x the largest published vocabularies, 256k"),
    "model.seq_len": _int_bound(1, MAX_SEQ_LEN, "longer than any announced context, 10M tokens"),
    "model.attention_window": _int_bound(1, MAX_SEQ_LEN, "same bound as model.seq_len"),
    "model.global_attention_every": _int_bound(1, MAX_LAYERS, "at most the layers bound (Gemma 3: 6)"),
    "model.mtp_layers": _int_bound(0, MAX_MTP_LAYERS, "16x the depth published models train (DeepSeek-V3: 1)"),
    "model.moe.experts": _int_bound(1, MAX_EXPERTS, "published MoE models route to <= 256 experts"),
    "model.moe.top_k": _int_bound(1, MAX_EXPERTS, "at most model.moe.experts"),
    "model.moe.expert_ffn_hidden": _int_bound(1, MAX_FFN, "same bound as model.ffn_hidden"),
    "model.moe.shared_experts": _int_bound(0, MAX_EXPERTS, "same bound as model.moe.experts"),
    "model.moe.dense_layers": _int_bound(0, MAX_LAYERS, "fewer than model.layers"),
    "model.moe.dense_ffn_hidden": _int_bound(1, MAX_FFN, "same bound as model.ffn_hidden"),
    "model.mla.kv_lora_rank": _int_bound(1, MAX_WIDTH, "at most the widest model bound (DeepSeek-V3: 512)"),
    "model.mla.qk_nope_head_dim": _int_bound(1, MAX_WIDTH, "at most the widest model bound (DeepSeek-V3: 128)"),
    "model.mla.qk_rope_head_dim": _int_bound(1, MAX_WIDTH, "at most the widest model bound (DeepSeek-V3: 64)"),
    "model.mla.v_head_dim": _int_bound(1, MAX_WIDTH, "at most the widest model bound (DeepSeek-V3: 128)"),
    "model.mla.q_lora_rank": _int_bound(0, MAX_WIDTH, "0 (no query latent) to the widest model bound (V3: 1536)"),
    # ---- training
    "training.global_batch": _int_bound(1, MAX_GLOBAL_BATCH, "~1000x the largest published batches, ~16k sequences"),
    "training.micro_batch": _int_bound(1, MAX_MICRO_BATCH, "far beyond what any GPU's memory holds"),
    "training.tokens": _float_bound(0.0, MAX_TOKENS, "~300x the largest published run, ~36T tokens", lo_open=True),
    "training.zero": _int_bound(0, 3, "ZeRO stages are 0, 1, 2 and 3"),
    "training.shard_group": _int_bound(1, MAX_GPUS, "a shard group is at most every GPU of the job"),
    "training.recompute_layers": _int_bound(1, MAX_LAYERS, "at most model.layers"),
    # ---- parallelism (each degree divides cluster.gpus, so the GPU bound is theirs too)
    "parallelism.tp": _int_bound(1, MAX_GPUS, "a degree cannot exceed the GPU bound"),
    "parallelism.pp": _int_bound(1, MAX_LAYERS, "at most model.layers"),
    "parallelism.dp": _int_bound(1, MAX_GPUS, "a degree cannot exceed the GPU bound"),
    "parallelism.cp": _int_bound(1, MAX_GPUS, "a degree cannot exceed the GPU bound"),
    "parallelism.ep": _int_bound(1, MAX_EXPERTS, "at most model.moe.experts"),
    "parallelism.etp": _int_bound(1, MAX_GPUS, "a degree cannot exceed the GPU bound"),
    "parallelism.vpp": _int_bound(1, MAX_LAYERS, "pp*vpp is at most model.layers"),
    # ---- cluster
    "cluster.gpus": _int_bound(1, MAX_GPUS, "larger than any announced cluster"),
    "cluster.gpus_per_node": _int_bound(1, MAX_NVLINK_DOMAIN, "the largest announced NVLink domain, NVL576"),
    "cluster.gpus_per_rack": _int_bound(1, MAX_NVLINK_DOMAIN, "at most cluster.gpus_per_node (a rack's NVLink domain)"),
    "cluster.nics_per_node": _int_bound(1, 2 * MAX_NVLINK_DOMAIN, "two NICs per GPU in the largest NVLink domain"),
    "cluster.nic_gbps": _float_bound(0.0, MAX_NIC_GBPS, "2x the fastest announced NIC, 1.6 Tb/s", lo_open=True),
    "cluster.tiers": _int_bound(1, 3, "fat-trees of 1, 2 or 3 switch tiers"),
    "cluster.oversubscription": _float_bound(1.0, MAX_OVERSUBSCRIPTION,
                                             "1.0 = non-blocking; a 64-port switch cannot exceed 63:1"),
    "cluster.pod_gpus": _int_bound(1, MAX_GPUS, "at most cluster.gpus"),
    "cluster.qps_per_connection": QPS_BOUND,
    # ---- costs (may also be {low, likely, high} ranges: each end has the same bound)
    "costs.usd_per_kwh": _float_bound(0.0, 10.0, "~20x the dearest retail electricity, ~0.5 USD/kWh"),
    "costs.pue": _float_bound(1.0, 5.0, "PUE >= 1 by definition; the worst surveyed sites are ~2.5"),
    "costs.colocation_usd_per_kw_month": _float_bound(0.0, 10_000.0, "~50x the wholesale colocation rate, ~184"),
    "costs.construction_usd_per_mw": _float_bound(0.0, 1e9, "~85x the build cost of a data centre, ~11.7e6/MW"),
    "costs.facility_life_years": _float_bound(0.0, 100.0, "no facility is amortized over a century", lo_open=True),
    "costs.depreciation_years": _float_bound(0.0, 50.0, "no hardware is depreciated over 50 years", lo_open=True),
    "costs.cost_of_capital": _float_bound(0.0, 1.0, "an annual rate, at most 100%"),
    "costs.maintenance_share": _float_bound(0.0, 1.0, "a yearly share of capex, at most all of it"),
    "costs.install_share": _float_bound(0.0, 1.0, "a one-off share of capex, at most all of it"),
    "costs.avg_utilization": _float_bound(0.0, 1.0, "a fraction of the servers' maximum power", lo_open=True),
    "costs.staff_usd_per_year": _float_bound(0.0, MAX_USD, "one trillion USD"),
    "costs.storage_usd": _float_bound(0.0, MAX_USD, "one trillion USD"),
    "costs.frontend_network_usd": _float_bound(0.0, MAX_USD, "one trillion USD"),
    "costs.prices.*": _float_bound(0.0, MAX_UNIT_PRICE_USD, "USD per unit; the dearest unit, an NVL72 rack, is ~4e6"),
    "costs.planes": _int_bound(1, 2 * MAX_NVLINK_DOMAIN, "at most one plane per NIC"),
    "costs.nodes_per_rack": _int_bound(1, 1024, "~60x the densest racks (18 compute trays)"),
    "costs.goodput.failure_rate_scale": _float_bound(0.0, 1000.0, "1000x the catalog's failure rates"),
    "costs.goodput.restart_min": _float_bound(0.0, 10_080.0, "a restart longer than a week is an outage"),
    "costs.goodput.checkpoint_bytes_per_param": _float_bound(0.0, 64.0, "fp32 weights + Adam states are 16 B",
                                                             lo_open=True),
    "costs.goodput.storage_write_gbytes_per_s": _float_bound(0.0, 1e6, "~100x the fastest parallel file systems",
                                                             lo_open=True),
    "costs.goodput.node_write_gbytes_per_s": _float_bound(0.0, 1e4, "~100x a node's fastest NICs", lo_open=True),
    "costs.goodput.checkpoint_interval_min": _float_bound(0.0, 525_600.0, "one checkpoint a year", lo_open=True),
    # ---- fleet inventory (planning.Fleet; its other numbers use the cluster.* bounds)
    "fleet.server_count": _int_bound(1, MAX_GPUS, "a server holds at least one GPU: at most the GPU bound"),
    # ---- uncertainty section and run parameters
    "uncertainty.samples": _int_bound(1, MAX_MONTE_CARLO_SAMPLES, "percentiles converge far below this"),
    "uncertainty.seed": _int_bound(0, MAX_SEED, "31-bit seeds stay portable"),
    "uncertainty.bins": _int_bound(1, 125, "performance points are capped at 125"),
    "params.monte_carlo": _int_bound(0, MAX_MONTE_CARLO_SAMPLES, "percentiles converge far below this"),
    "params.seed": _int_bound(0, MAX_SEED, "31-bit seeds stay portable"),
    "params.top_k": _int_bound(1, MAX_TOP_K, "alternatives a person can compare"),
    "params.qps": QPS_BOUND,
    "params.seeds": _int_bound(1, MAX_RUN_SEEDS, "a fabric-study run must finish inside the worker's time limit"),
    # ---- a pinned fabric study (engine.fabric.pinned_study, issue #13)
    "fabric_study.run": _int_bound(1, 2**63 - 1, "a database id"),
    "fabric_study.gpus": _int_bound(1, MAX_GPUS, "the cluster bound"),
    "fabric_study.ranks": _int_bound(1, MAX_GPUS, "the cluster bound"),
    "fabric_study.seeds": _int_bound(1, MAX_STUDY_SEEDS, "P10/P50/P90 over seeds converge far below this"),
    "fabric_study.oversubscription": _float_bound(1.0, MAX_OVERSUBSCRIPTION, "as cluster.oversubscription"),
    "fabric_study.qps": QPS_BOUND,
    "fabric_study.efficiency": _float_bound(0.0, 1.0, "achieved over ideal completion time, in (0, 1]",
                                            lo_open=True),
}

RANGE_ENDS = ("low", "likely", "high")


def bound_for(field: str) -> Bound | None:
    """The bound of a dotted field path, or ``None`` if the field is not numeric.

    ``costs.prices.<key>`` matches ``costs.prices.*``; a range end ``<field>.low|likely|high`` has the bound of
    ``<field>``.
    """
    found = BOUNDS.get(field)
    if found is not None:
        return found
    head, _, last = field.rpartition(".")
    if not head:
        return None
    if last in RANGE_ENDS:
        found = bound_for(head)
        if found is not None:
            return found
    return BOUNDS.get(f"{head}.*")


# ------------------------------------------------------------------------------------------------ checks


def _type_name(value: Any) -> str:
    return "boolean" if isinstance(value, bool) else type(value).__name__


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        digits = int(abs(value).bit_length() * math.log10(2)) + 1  # no str(): O(n^2) for huge ints
        return f"an integer of about {digits} digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _span(kind: Kind, lo: float | None, hi: float | None, lo_open: bool, reason: str) -> str:
    noun = "an integer" if kind == "int" else "a number"
    if lo is not None and hi is not None and not lo_open:
        text = f"{noun} between {_fmt(lo)} and {_fmt(hi)}"
    else:
        parts = [f"{'>' if lo_open else '>='} {_fmt(lo)}"] if lo is not None else []
        parts += [f"<= {_fmt(hi)}"] if hi is not None else []
        text = f"{noun} {' and '.join(parts)}" if parts else noun
    return f"{text} ({reason})" if reason else text


def _limits(field: str, lo: float | None, hi: float | None,
            lo_open: bool | None) -> tuple[float | None, float | None, bool, str]:
    """Explicit limits, else the table's; the table's reason is quoted only when its limits are the ones used."""
    table = bound_for(field)
    if table is None:
        return lo, hi, bool(lo_open), ""
    lo_v = table.lo if lo is None else lo
    hi_v = table.hi if hi is None else hi
    open_v = table.lo_open if lo_open is None and lo is None else bool(lo_open)
    same = (lo_v, hi_v, open_v) == (table.lo, table.hi, table.lo_open)
    return lo_v, hi_v, open_v, table.reason if same else ""


def check_int(value: Any, field: str, lo: float | None = None, hi: float | None = None) -> int:
    """``value`` as an ``int`` if it is an integer in ``[lo, hi]`` (``None`` = the table's bound for ``field``).

    Refused: booleans, strings (``"1024"``), non-integral floats (``-0.5``, ``2.5``), NaN and infinities, and
    anything outside the bound. An integral float (``8.0``) is accepted: JSON has one number type. Floats are
    compared before conversion, so ``1e308`` is refused without building a 309-digit integer.
    """
    lo, hi, _, reason = _limits(field, lo, hi, False)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BoundError(field, f"must be an integer, got {_type_name(value)} {_show(value)}", WRONG_TYPE)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BoundError(field, f"must be a finite integer, got {value}")
        if not value.is_integer():
            raise BoundError(field, f"must be an integer, got {value:g}", WRONG_TYPE)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise BoundError(field, f"must be {_span('int', lo, hi, False, reason)}, got {_show(value)}")
    return int(value)


# training.framework_release: a month, YYYY-MM, from the first release a profile dates (engine/performance/
# frameworks.py: Megatron-LM 2019) to the current month (a release in the future is no release)
EARLIEST_RELEASE = "2019-01"
_MONTHS = 12


def check_release(value: Any, field: str, today: datetime.date | None = None) -> str:
    """``value`` as a ``"YYYY-MM"`` month between :data:`EARLIEST_RELEASE` and the current month."""
    if not isinstance(value, str):
        raise BoundError(field, f'must be a month "YYYY-MM", got {_type_name(value)} {_show(value)}', WRONG_TYPE)
    year, dash, month = value.partition("-")
    if not (dash and len(year) == 4 and len(month) == 2 and year.isdigit() and month.isdigit()
            and 1 <= int(month) <= _MONTHS):
        raise BoundError(field, f'must be a month "YYYY-MM", got {_show(value)}', WRONG_TYPE)
    now = today or datetime.date.today()
    latest = f"{now.year:04d}-{now.month:02d}"
    if not EARLIEST_RELEASE <= value <= latest:
        raise BoundError(field, f"must be a month from {EARLIEST_RELEASE} to {latest} (the current month), "
                                f"got {_show(value)}")
    return value


def check_number(value: Any, field: str, lo: float | None = None, hi: float | None = None, *,
                 lo_open: bool | None = None) -> float:
    """``value`` as a finite ``float`` within ``[lo, hi]`` (``(lo, hi]`` if ``lo_open``); defaults from the table.

    Refused: booleans, strings, NaN and infinities, integers too large for a float, and anything out of bound.
    """
    lo, hi, open_, reason = _limits(field, lo, hi, lo_open)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BoundError(field, f"must be a number, got {_type_name(value)} {_show(value)}", WRONG_TYPE)
    if isinstance(value, float) and not math.isfinite(value):
        raise BoundError(field, f"must be a finite number, got {value}")
    # compared before float(): an int such as 10**400 would overflow the conversion
    too_low = lo is not None and (value <= lo if open_ else value < lo)
    if too_low or (hi is not None and value > hi):
        raise BoundError(field, f"must be {_span('float', lo, hi, open_, reason)}, got {_show(value)}")
    try:
        return float(value)
    except OverflowError:  # only reachable without an upper bound
        raise BoundError(field, f"must be a finite number, got {_show(value)}") from None


def check_field(value: Any, field: str, like: str | None = None) -> int | float:
    """Check ``value`` against the table's type and bound for ``field`` (a dotted path).

    ``like``: the table field whose bound applies when ``field`` is the same quantity under another name (the
    flow simulator's ``qps`` is a ``cluster.qps_per_connection``); the error still names ``field``.
    """
    if like is not None and like != field:
        try:
            return check_field(value, like)
        except BoundError as exc:
            raise BoundError(field, exc.message, exc.code) from None
    bound = bound_for(field)
    if bound is None:
        raise LookupError(f"no bound is declared for {field!r}; add it to engine.schema.bounds.BOUNDS")
    if bound.kind == "int":
        return check_int(value, field)
    return check_number(value, field)


def check_samples(values: Any, field: str) -> Any:
    """Check an array (or iterable) of sampled values against ``field``'s bound; returns ``values``.

    Uses numpy's vectorized min/max when ``values`` has them, so 100,000 samples cost microseconds.
    """
    bound = bound_for(field)
    if bound is None:
        raise LookupError(f"no bound is declared for {field!r}")
    if hasattr(values, "min") and hasattr(values, "max") and getattr(values, "size", 1) > 0:
        lo_v, hi_v = float(values.min()), float(values.max())
        for v in (lo_v, hi_v):
            check_number(v, field, bound.lo, bound.hi, lo_open=bound.lo_open)
        return values
    for v in values:
        check_number(float(v), field, bound.lo, bound.hi, lo_open=bound.lo_open)
    return values


# ------------------------------------------------------------------------------------------------- work
# Budgets for work enumerated from the inputs. Each is checked before the work is allocated.
# candidate layouts of one search: measured 700k layouts = 2.8 s and 0.8 GB RSS in one vectorized pass (2-core
# CI machine), so 1M is ~4 s; evaluated in chunks of LAYOUT_CHUNK with a checkpoint() between chunks
MAX_LAYOUTS = 1_000_000
LAYOUT_CHUNK = 100_000
MAX_PERF_POINTS = 125  # distinct performance points of one Monte Carlo (see uncertainty.py)
MAX_SWEEP_RUNS = 512  # runs of one sweep (the default of the FP_MAX_SWEEP_RUNS setting)
MAX_SWEEP_AXES = 8  # axes of one sweep
MAX_DIVISOR_INPUT = MAX_GPUS * MAX_GLOBAL_BATCH  # divisors() is O(sqrt n): <= 2^22 trial divisions
MAX_SENSITIVITY_INPUTS = 64  # tornado inputs (each costs two pipeline evaluations)
MAX_RANGES = 64  # ranges in one scenario document


def check_work(what: str, count: int, limit: int, field: str = "scenario", hint: str = "") -> None:
    """Refuse work before it starts: ``count`` items of ``what`` against ``limit``.

    ``field`` is the input that drives the count (for the error's field path).
    """
    if count > limit:
        tail = f"; {hint}" if hint else ""
        raise WorkLimitError(field, f"would enumerate {count:,} {what}, more than the limit of {limit:,}{tail}")


def count_product(sizes: Iterable[int]) -> int:
    """Size of a Cartesian product (exact Python int, no overflow)."""
    return math.prod(int(s) for s in sizes)


def check_divisor_input(n: int, field: str) -> int:
    """Refuse ``n`` whose divisor enumeration (O(sqrt n)) would be unbounded; returns ``n``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > MAX_DIVISOR_INPUT:
        raise WorkLimitError(field, f"cannot enumerate the divisors of {_show(n)} (at most {_fmt(MAX_DIVISOR_INPUT)})")
    return n



# ---------------------------------------------------------------------------------------- admission (#23)
# Work a single engine call may allocate, estimated from its inputs *before* any array is built (fabric studies:
# engine.flowsim.estimate; capacity plans: engine.fleet.estimate). The platform compares the same estimates with
# its own, smaller, time and memory budgets (simulations/limits.py) before it queues a run.
MAX_STUDY_FLOWS = 6_000_000  # flows of one fabric-simulation seed after QP expansion (the simulator's own ceiling)
MAX_STUDY_BYTES = 4 * 1024**3  # peak memory of one fabric simulation: refused before the first allocation
MAX_PLAN_EVENTS = 50_000_000  # jobs + failures over every simulation of one plan run (~25 min of simulation)


def _amount(x: float, unit: str) -> str:
    if unit == "bytes":
        for name, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
            if x >= size:
                return f"{x / size:,.1f} {name}"
        return f"{x:,.0f} bytes"
    if unit == "s":
        return f"{x:,.0f} s" if x >= 10 else f"{x:.1f} s"
    return f"{x:,.0f} {unit}"


def check_estimate(what: str, estimate: float, limit: float, field: str, unit: str, hint: str = "") -> None:
    """Refuse work whose *estimate* (seconds, bytes, ...) exceeds ``limit``, naming the input that drives it.

    ``"params.seeds: would need about 1,240 s of fabric simulation, more than the limit of 270 s; lower ..."``.
    """
    if not math.isfinite(estimate) or estimate > limit:
        shown = _amount(estimate, unit) if math.isfinite(estimate) else "an unbounded amount"
        tail = f"; {hint}" if hint else ""
        raise WorkLimitError(field, f"would need about {shown} of {what}, more than the limit of "
                                    f"{_amount(limit, unit)}{tail}")
