"""Flow-level fabric simulator (issue #13): closed-form checks, interface contract, bad input.

Every expected figure here is derived from first principles in the test (balls into bins, port ratios, the
max-min definition), never read back from the simulator.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.flowsim.network import TIERS, network_for
from engine.flowsim.placement import Layout
from engine.flowsim.rates import max_min_rates
from engine.flowsim.simulate import simulate
from engine.flowsim.study import quote, study
from tests.engine._scenarios import LLAMA_7B


def doc(gpus: int, parallelism: dict[str, Any] | None = None, **cluster: Any) -> dict[str, Any]:
    return {
        "model": dict(LLAMA_7B),
        "training": {"global_batch": gpus, "micro_batch": 1, "tokens": 1e12},
        "parallelism": parallelism or {"tp": 8, "pp": 1},
        "cluster": {"gpu": "H100-SXM", "gpus": gpus, **cluster},
    }


# 2,048 H100 with 8 x 400G on 64-port QM9700: a full 2-tier fat-tree, 64 leaves of 32 down / 32 up, 32 spines
IB_2K = doc(2048)


# --------------------------------------------------------------------------------------------- max-min


def test_progressive_filling_matches_the_textbook_allocation() -> None:
    # link 0 (cap 1): groups A, B; link 1 (cap 2): groups A, C; link 2 (cap 10): group C twice (a ring crossing
    # it in both directions). Max-min: A = B = 0.5 (link 0), C then fills link 1 to 2 - 0.5 = 1.5.
    link = np.array([0, 0, 1, 1, 2, 2])
    group = np.array([0, 1, 0, 2, 2, 2])
    rate, bott = max_min_rates(link, group, np.ones(6), np.array([1.0, 2.0, 10.0]), 3)
    assert rate == pytest.approx([0.5, 0.5, 1.5])
    assert bott.tolist() == [0, 0, 1]


def test_a_group_with_no_links_is_unconstrained() -> None:
    rate, bott = max_min_rates(np.array([0]), np.array([0]), np.ones(1), np.array([4.0]), 2)
    assert rate[0] == 4.0 and math.isinf(rate[1]) and bott[1] == -1


# --------------------------------------------------------------------------------------------- topology


def test_network_follows_the_fabric_sizing() -> None:
    s = parse_scenario(IB_2K)
    net = network_for(s.topo, 3600.0)
    assert (net.tiers, net.leaves, net.up, net.leaf_down, net.spines) == (2, 64, 32, 32, 32)
    links = net.physical_links()
    assert links["nic"] == 2 * 2048 and links["leaf-spine"] == 2 * s.topo.links["leaf_spine"]
    big = network_for(parse_scenario(doc(16384)).topo, 3600.0)
    assert big.tiers == 3 and big.pods * big.pod_leaves >= big.leaves
    assert big.physical_links()["spine-core"] == 2 * parse_scenario(doc(16384)).topo.links["spine_core"]


def test_rank_order_is_tp_then_cp_then_dp_then_pp() -> None:
    lay = Layout(tp=2, cp=2, dp=2, pp=2, ep=2)
    assert lay.groups("tp")[0].tolist() == [0, 1]
    assert lay.groups("cp")[0].tolist() == [0, 2]
    assert lay.groups("dp")[0].tolist() == [0, 4]
    assert lay.groups("pp")[0].tolist() == [0, 8]
    # expert groups: ep consecutive ranks of the combined (dp, cp) index, same tp and pp
    assert lay.groups("ep")[0].tolist() == [0, 2]
    assert sorted(np.concatenate(lay.groups("dp")).tolist()) == list(range(16))


# --------------------------------------------------------------------------------------------- closed forms


def test_adaptive_routing_carries_a_cross_leaf_permutation_at_its_residual_efficiency() -> None:
    """Every NIC's flow leaves its leaf: the uplinks are exactly full, and adaptive balancing delivers what the
    performance model's closed form charges for it, AR_EFF of line rate (0.97 IB, 0.95 Ethernet)."""
    from engine.fabric.routing import AR_EFF, crossing_share

    out = simulate(IB_2K, "cross-leaf", routing="adaptive", seeds=3)
    assert out["inputs"]["fabric"]["tiers"] == 2
    assert out["efficiency"]["p50"] == pytest.approx(AR_EFF["infiniband"], abs=0.01)
    closed = crossing_share("adaptive", "infiniband", 1.0, 1.0)
    assert out["efficiency"]["p50"] == pytest.approx(float(closed), abs=0.01)
    roce = simulate(doc(2048, fabric="roce"), "cross-leaf", routing="adaptive", seeds=2)
    assert roce["efficiency"]["p50"] == pytest.approx(AR_EFF["roce"], abs=0.01)
    # a light load (a ring inside each leaf's reach) loses nothing to the balancing
    assert simulate(IB_2K, "ring-allreduce", routing="adaptive", seeds=1)["efficiency"]["p50"] > 0.97


def test_single_qp_ecmp_mean_rate_is_balls_into_bins_but_completion_is_far_lower() -> None:
    k = 32  # uplinks per leaf; a cross-leaf shift puts k flows from each leaf on them
    out = simulate(IB_2K, "cross-leaf", routing="ecmp", qps=1, seeds=20)
    balls_into_bins = 1.0 - (1.0 - 1.0 / k) ** k  # expected fraction of uplinks carrying at least one flow
    assert out["flow_throughput"]["mean"] == pytest.approx(balls_into_bins, abs=0.03)
    # completion waits for the most loaded uplink: with 64 leaves the max bin holds ~5-6 flows
    assert out["efficiency"]["p50"] < 0.5 * balls_into_bins
    assert out["bottleneck_tier"] == "leaf-spine"


def test_more_queue_pairs_raise_ecmp_efficiency_monotonically() -> None:
    means = [simulate(IB_2K, "cross-leaf", routing="ecmp", qps=q, seeds=12)["efficiency"]["mean"]
             for q in (1, 2, 4, 8)]
    assert all(b > a for a, b in itertools.pairwise(means)), means
    assert means[-1] > 2 * means[0]


def test_two_to_one_oversubscribed_leaf_halves_cross_leaf_throughput() -> None:
    full = simulate(IB_2K, "cross-leaf", routing="adaptive", seeds=2)
    half = simulate(doc(2048, oversubscription=2.0), "cross-leaf", routing="adaptive", seeds=2)
    fab = half["inputs"]["fabric"]
    # 21/43 on 64 ports: every NIC's flow shares the uplinks, which adaptive balancing fills to AR_EFF
    from engine.fabric.routing import AR_EFF

    expected = AR_EFF["infiniband"] * fab["leaf_up"] / fab["leaf_down"]
    assert half["efficiency"]["p50"] == pytest.approx(expected, rel=0.02)
    assert half["efficiency"]["p50"] / full["efficiency"]["p50"] == pytest.approx(0.5, abs=0.03)
    # both are bound by the leaf uplinks: at 1:1 only by adaptive balancing's residual loss (3%)
    assert half["bottleneck_tier"] == "leaf-spine" and full["bottleneck_tier"] == "leaf-spine"
    assert full["efficiency"]["p50"] == pytest.approx(AR_EFF["infiniband"], abs=0.01)


def test_rail_optimized_keeps_same_rail_ring_traffic_inside_the_leaf() -> None:
    # 256 GPUs = 32 nodes: one rail-optimized leaf per rail holds NIC j of all 32 nodes
    rail = simulate(doc(2048, topology="rail-optimized"), "ring-allreduce", ranks=256, routing="ecmp", seeds=3)
    assert rail["tier_links_used"]["leaf-spine"] == 0
    assert rail["efficiency"]["p10"] == 1.0
    # the same ring on a plain fat-tree (4 nodes per leaf) crosses leaves between every 4th node
    flat = simulate(IB_2K, "ring-allreduce", ranks=256, routing="ecmp", seeds=3)
    assert flat["tier_links_used"]["leaf-spine"] > 0


def test_pinned_routes_are_collision_free_for_a_packed_shift_but_not_for_scattered_jobs() -> None:
    packed = simulate(IB_2K, "cross-leaf", routing="pinned", seeds=2)
    assert packed["efficiency"]["p10"] == 1.0
    scattered = simulate(IB_2K, "permutation", ranks=512, routing="pinned", placement="random", seeds=10)
    assert scattered["efficiency"]["p50"] < 0.7


def test_three_tier_cross_pod_traffic_uses_the_core() -> None:
    out = simulate(doc(16384, fabric="roce"), "permutation", routing="ecmp", seeds=2)
    assert out["tier_links_used"]["spine-core"] > 0
    assert out["links_by_tier"]["spine-core"] > 0
    assert out["efficiency"]["p50"] < 0.5  # two hashed stages: collisions compound


def test_single_node_job_stays_on_nvlink() -> None:
    out = simulate(IB_2K, "ring-allreduce", ranks=8, seeds=2)
    assert out["network_flows"] == 0
    assert out["tier_links_used"]["nic"] == 0 and out["efficiency"]["p50"] == 1.0
    # the 8 rings share each GPU's NVLink port: bus bandwidth = one direction of NVLink (900 GB/s / 2 = 3.6 Tb/s)
    assert out["collectives"][0]["gbps_per_gpu"]["p50"] == pytest.approx(3600.0, rel=1e-6)


def test_concurrent_collectives_share_the_nics() -> None:
    moe = doc(1024, parallelism={"tp": 1, "pp": 1, "ep": 64},
              ) | {"model": dict(LLAMA_7B, moe={"experts": 64, "top_k": 8, "expert_ffn_hidden": 2048})}
    alone = simulate(moe, "ring-allreduce:dp", routing="ecmp", seeds=4)
    both = simulate(moe, ["ring-allreduce:dp", "all-to-all:ep"], routing="ecmp", seeds=4)
    assert [c["traffic"] for c in both["collectives"]] == ["ring-allreduce", "all-to-all"]
    assert both["collectives"][1]["ranks_per_group"] == 64
    assert both["flows"] > alone["flows"]
    assert both["efficiency"]["p50"] <= min(c["efficiency"]["p50"] for c in both["collectives"]) + 1e-12


def test_background_traffic_slows_a_hashed_job() -> None:
    quiet = simulate(IB_2K, "ring-allreduce", ranks=512, routing="ecmp", placement="fragmented", seeds=10)
    busy = simulate(IB_2K, "ring-allreduce", ranks=512, routing="ecmp", placement="fragmented", background=1.0,
                    seeds=10)
    assert busy["efficiency"]["mean"] < quiet["efficiency"]["mean"]


def test_tree_and_sendrecv_and_allgather_run() -> None:
    for kind in ("tree-allreduce", "ring-allgather", "ring-reducescatter"):
        out = simulate(IB_2K, kind, ranks=512, routing="adaptive", seeds=2)
        assert out["efficiency"]["p50"] == pytest.approx(1.0)
    pp = simulate(doc(2048, parallelism={"tp": 8, "pp": 4}), "pp-sendrecv", routing="ecmp", seeds=3)
    assert pp["collectives"][0]["group"] == "pp" and pp["network_flows"] == 2 * 3 * 2048 // 4


# --------------------------------------------------------------------------------------------- contract


def test_output_contract() -> None:
    out = simulate(IB_2K, traffic="ring-allreduce", ranks=None, routing="ecmp", qps=1, placement="packed", seeds=5)
    for key in ("efficiency", "bottleneck_tier", "tier_utilization", "flows", "links", "elapsed_s", "inputs",
                "flow_throughput", "bottleneck_links"):
        assert key in out
    e = out["efficiency"]
    assert 0 < e["p10"] <= e["p50"] <= e["p90"] <= 1
    assert out["bottleneck_tier"] in (*TIERS, "none")
    assert set(out["tier_utilization"]) == {"nvlink", "nic", "leaf-spine"}  # 2 tiers: no core
    assert out["flows"] == 2048 + 8 * 2048  # one NIC hop per node per ring + 8 NVLink hops per node, 8 rings
    assert out["links"] == 2 * 2048 + 2 * 2048 + 2 * 2048
    assert out["inputs"]["routing"] == "ecmp" and out["inputs"]["seeds"] == 5
    assert sum(out["flow_throughput"]["histogram"]["counts"]) == 5 * 2048
    assert out["bottleneck_links"] and out["bottleneck_links"][0]["tier"] == "leaf-spine"


def test_defaults_come_from_the_scenario() -> None:
    out = simulate(doc(256, fabric="roce", routing="ecmp-qp"), seeds=2)
    assert out["inputs"]["routing"] == "ecmp-qp" and out["inputs"]["qps"] == 4
    assert simulate(IB_2K, ranks=64, seeds=1)["inputs"]["routing"] == "adaptive"


def test_progress_reports_seeds_and_can_cancel() -> None:
    seen: list[tuple[int, int]] = []
    simulate(IB_2K, ranks=256, seeds=3, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]

    class Cancelled(Exception):
        pass

    def stop(done: int, total: int) -> None:
        raise Cancelled

    with pytest.raises(Cancelled):
        simulate(IB_2K, ranks=256, seeds=3, progress=stop)


def test_seeds_are_reproducible() -> None:
    a = simulate(IB_2K, "permutation", ranks=512, routing="ecmp", placement="random", seeds=4)
    b = simulate(IB_2K, "permutation", ranks=512, routing="ecmp", placement="random", seeds=4)
    assert a["per_seed"] == b["per_seed"]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"traffic": "broadcast"}, "traffic"),
    ({"routing": "magic"}, "routing"),
    ({"qps": 0}, "qps"),
    ({"qps": True}, "qps"),
    ({"seeds": 0}, "seeds"),
    ({"placement": "best"}, "placement"),
    ({"ranks": 12}, "ranks"),
    ({"ranks": 4096}, "ranks"),
    ({"placement": "fragmented", "fragmentation": 0.9}, "fragmentation"),
    ({"fragmentation": float("nan")}, "fragmentation"),
    ({"traffic": "ring-allreduce:world"}, "group"),
    ({"traffic": "cross-leaf", "ranks": 16}, "ranks"),
])
def test_bad_input_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        simulate(IB_2K, **{"seeds": 1, **kwargs})
    assert exc.value.field == field


def test_bad_scenario_goes_through_the_one_parser() -> None:
    bad = doc(2048)
    bad["cluster"]["gpus"] = -8
    with pytest.raises(ScenarioError) as exc:
        simulate(bad, seeds=1)
    assert exc.value.field.startswith("cluster.gpus")


# --------------------------------------------------------------------------------------------- study


def test_study_compares_variants_and_writes_a_quotable_sentence() -> None:
    seen: list[int] = []
    out = study(doc(2048, fabric="roce"), ranks=1024, seeds=4, progress=lambda d, t: seen.append(d))
    labels = [row["label"] for row in out["table"]]
    assert labels == ["single-QP ECMP", "8 QPs", "adaptive"]
    p50 = {row["label"]: row["p50"] for row in out["table"]}
    assert p50["single-QP ECMP"] < p50["8 QPs"] <= p50["adaptive"]
    assert out["quote"] == (f"single-QP ECMP delivers {100 * p50['single-QP ECMP']:.0f}% of line rate to this "
                            f"1,024-GPU ring all-reduce; 8 QPs: {100 * p50['8 QPs']:.0f}%; "
                            f"adaptive: {100 * p50['adaptive']:.0f}%")
    assert seen == list(range(1, 13))
    assert out["efficiency"] == out["variants"][0]["result"]["efficiency"]


def test_study_variants_are_checked() -> None:
    with pytest.raises(ScenarioError) as exc:
        study(IB_2K, seeds=1, variants=[{"routing": "ecmp", "color": "red"}])
    assert exc.value.field == "variants.0.color"
    with pytest.raises(ScenarioError) as exc:
        study(IB_2K, seeds=1, variants=[{"routing": "magic"}])
    assert exc.value.field == "routing"
    assert quote(2048, "ring-allreduce:all", [("adaptive", 0.987)]) == \
        "adaptive delivers 99% of line rate to this 2,048-GPU ring all-reduce"


def test_a_time_budget_stops_a_long_simulation_between_seeds() -> None:
    from engine.budget import BudgetExceeded, work_budget

    done: list[int] = []
    with pytest.raises(BudgetExceeded), work_budget(seconds=0.5, what="fabric study"):
        simulate(doc(16384), "ring-allreduce", routing="ecmp", qps=8, seeds=1000,
                 progress=lambda d, t: done.append(d))
    assert len(done) < 1000  # stopped long before the 1,000th seed


def test_folded_expert_groups_are_strided_by_etp() -> None:
    """MoE parallel folding: a stage's tp*cp*dp ranks form the expert grid etp (innermost) x ep x edp, so with
    tp 4, etp 1, ep 8 on 16 ranks an EP group is 8 consecutive ranks (stride etp = 1), crossing the TP groups that
    unfolded expert parallelism (stride tp) never joins; with etp = tp the groups are the unfolded ones."""
    folded = Layout(tp=4, cp=1, dp=4, pp=1, ep=8, etp=1)
    assert folded.groups("ep").tolist() == [list(range(8)), list(range(8, 16))]
    two = Layout(tp=4, cp=1, dp=4, pp=1, ep=4, etp=2)
    assert two.groups("ep")[0].tolist() == [0, 2, 4, 6]  # stride etp = 2
    plain = Layout(tp=4, cp=1, dp=4, pp=1, ep=4)
    same = Layout(tp=4, cp=1, dp=4, pp=1, ep=4, etp=4)
    assert same.groups("ep").tolist() == plain.groups("ep").tolist()
    assert plain.groups("ep")[0].tolist() == [0, 4, 8, 12]


def test_a_folded_moe_scenario_simulates_its_expert_traffic() -> None:
    """A layout only folding makes possible (ep 16 does not divide dp*cp = 8) runs its EP all-to-all over the
    folded groups: 16 ranks spanning 2 nodes, so it reaches the NICs."""
    moe = {**LLAMA_7B, "moe": {"experts": 64, "top_k": 8, "expert_ffn_hidden": 1408}}
    scenario = {**doc(64, {"tp": 8, "pp": 1, "cp": 1, "ep": 16, "etp": 1}), "model": moe}
    out = simulate(scenario, "all-to-all:ep", seeds=2)
    assert out["inputs"]["layout"]["etp"] == 1 and out["inputs"]["layout"]["from_scenario"]
    assert out["efficiency"]["p50"] > 0
    with pytest.raises(ScenarioError, match="etp\\*ep divide tp\\*cp\\*dp"):
        simulate(scenario, "all-to-all:ep", ranks=24, seeds=1)  # 24 ranks: tp*cp*dp = 24, not a multiple of 16
