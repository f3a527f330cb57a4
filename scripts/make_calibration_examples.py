"""Write the SYNTHETIC calibration example data: nccl-tests outputs and step logs in every supported format.

    .venv/bin/python scripts/make_calibration_examples.py          # rewrites tests/data/calibration/, examples/calibration/

Two fleets, each generated from the engine's own equations with chosen "true" efficiencies plus noise
(deterministic seeds), so tests can check that the fit recovers the truth and the demo shows a real effect:

* ``tests/data/calibration/`` - an H100 SXM, 400G NDR InfiniBand, rail-optimized fleet. The engine's
  uncalibrated curves already sit on published figures (intra-node NVLS all-reduce ~480 GB/s, users measured
  476, NVIDIA/nccl-tests issue 290; 46-48 GB/s bus bandwidth per NDR NIC, same issue). This synthetic fleet
  is set 12-20% below them across nodes (as a fleet with a GPU-NIC PCIe or tuning problem would be) with
  twice the per-step latency, and its GEMMs sustain 0.45 (bf16) / 0.42 (fp8) of peak instead of 0.52 / 0.50.
  Step times therefore resemble published H100 runs at 33-40% MFU (Llama 3 405B reported 38-43%).
* ``examples/calibration/`` - a DGX A100 (8x200G HDR InfiniBand) fleet for the demo, around the published
  230 GB/s intra-node all-reduce (NVIDIA/nccl-tests issue 175) and 192 GB/s across nodes (NVIDIA/nccl issue
  812), with its inter-node bandwidth 10% lower and GEMMs at 0.60 of peak instead of 0.66.

Every file says SYNTHETIC in its first line. Nothing here is a measurement of a real cluster.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.calibration import synth  # noqa: E402
from engine.calibration.runs import RunModel  # noqa: E402
from engine.document.parse import parse_scenario  # noqa: E402
from engine.performance.context import make_context  # noqa: E402
from engine.performance.hardware import gpu_spec  # noqa: E402
from engine.performance.terms.flops import flops_per_token  # noqa: E402
from engine.schema.calibration import Profile  # noqa: E402

LLAMA_7B = {"name": "Llama-2-7B", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "gated_ffn": True,
            "vocab": 32000, "seq_len": 4096}
LLAMA_70B = {"name": "Llama-2-70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
             "gated_ffn": True, "vocab": 32000, "seq_len": 4096}
GPT_22B = {"name": "GPT-22B", "layers": 48, "hidden": 6144, "heads": 64, "kv_heads": 64, "ffn_hidden": 24576,
           "gated_ffn": False, "vocab": 51200, "seq_len": 2048}

H100_FLEET = {"gpu": "H100-SXM", "gpus": 128, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 400,
              "fabric": "infiniband", "topology": "rail-optimized"}
A100_FLEET = {"gpu": "A100-80GB", "gpus": 64, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 200,
              "fabric": "infiniband", "topology": "fat-tree"}


def _doc(fleet: dict[str, Any], model: dict[str, Any], gpus: int, gb: int, mb: int, prec: str, tp: int, pp: int,
         rc: str = "selective", vpp: int = 1, attention: str | None = None) -> dict[str, Any]:
    training: dict[str, Any] = {"global_batch": gb, "micro_batch": mb, "precision": prec, "recompute": rc,
                                "tokens": 1e12, "zero": 1}
    if attention:
        training["attention"] = attention
    return {"model": model, "training": training,
            "parallelism": {"tp": tp, "pp": pp, "cp": 1, "ep": 1, "vpp": vpp, "sequence_parallel": tp > 1},
            "cluster": {**fleet, "gpus": gpus}}


# (collective, ranks, eta, alpha_us across nodes, latency multiplier inside a node)
H100_NCCL = [("all_reduce", 8, 0.96, None, 1.4), ("all_reduce", 16, 0.85, 5.5, 1.0), ("all_reduce", 64, 0.85, 5.5, 1.0),
             ("all_gather", 32, 0.82, 5.5, 1.0), ("reduce_scatter", 32, 0.84, 5.5, 1.0),
             ("alltoall", 16, 0.80, 5.5, 1.0), ("sendrecv", 16, 0.88, 5.5, 1.0)]
A100_NCCL = [("all_reduce", 8, 1.0, None, 1.2), ("all_reduce", 32, 0.90, 4.0, 1.0), ("all_gather", 32, 0.90, 4.0, 1.0),
             ("reduce_scatter", 32, 0.90, 4.0, 1.0)]


def _truth_profile(fleet: dict[str, Any], nccl: list[tuple[str, int, float, float | None, float]],
                   gemm: dict[str, float]) -> Profile:
    colls = []
    for coll, ranks, eta, alpha, lam in nccl:
        scope = "intra" if ranks <= int(fleet["gpus_per_node"]) else "inter"
        entry: dict[str, Any] = {"collective": coll, "kind": synth.KIND[coll], "scope": scope, "eta": eta,
                                 "eta_sigma": 0.01}
        if scope == "inter":
            entry.update(alpha_us=alpha, alpha_us_sigma=0.1)
        else:
            entry.update(latency_scale=lam, latency_scale_sigma=0.01)
        colls.append(entry)
    return Profile(fleet=dict(fleet), name="truth", collectives=colls,
                   gemm={k: {"eff": v, "sigma": 0.0} for k, v in gemm.items()})


def write_fleet(out: Path, fleet: dict[str, Any], nccl: list[tuple[str, int, float, float | None, float]],
                gemm: dict[str, float], runs: list[tuple[str, str, dict[str, Any]]], prefix: str,
                about: str, gpu_name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"about": about, "fleet": fleet, "nccl": [], "runs": [],
                                "truth": {"nccl": [{"collective": c, "ranks": r, "eta": e, "alpha_us": a,
                                                    "latency_scale": la} for c, r, e, a, la in nccl],
                                          "gemm_eff": gemm}}
    for i, (coll, ranks, eta, alpha, lam) in enumerate(nccl):
        name = f"{prefix}_{coll}_{ranks}ranks.txt"
        text = synth.synth_nccl_tests(fleet, coll, ranks, eta=eta, alpha_us=alpha, lam=lam, noise=0.02, seed=100 + i,
                                      gpu_name=gpu_name)
        (out / name).write_text(text, encoding="utf-8")
        manifest["nccl"].append({"file": name, "collective": coll, "ranks": ranks})
    truth = _truth_profile(fleet, nccl, gemm)
    for i, (rid, fmt, doc) in enumerate(runs):
        rm = RunModel(rid, doc, None, None)
        t = rm.step_time(None, truth)
        times = synth.step_times(t, 40, noise=0.012, warmup=3, warmup_factor=2.5, seed=200 + i)
        s = parse_scenario(doc)
        ctx = make_context(s, gpu_spec(s.cluster.gpu))
        tokens_step = int(s.training.global_batch * s.model.seq_len)
        model_tf = 3.0 * flops_per_token(ctx).forward_flops * tokens_step / s.cluster.gpus / 1e12
        extra: dict[str, Any] = {}
        if fmt == "megatron":
            text = synth.megatron_log(times, global_batch=s.training.global_batch,
                                      tflops_per_gpu=[model_tf / x for x in times])
            ext = "log"
        elif fmt == "nemo":
            text = synth.nemo_log(times, global_batch=s.training.global_batch)
            ext = "log"
        elif fmt == "torchtitan":
            text = synth.torchtitan_log(times, tokens_per_step=tokens_step, gpus=s.cluster.gpus,
                                        peak_tflops=ctx.peak / 1e12,
                                        flops_per_token=3.0 * flops_per_token(ctx).forward_flops)
            ext = "log"
            extra = {"tokens_per_step": tokens_step, "gpus": s.cluster.gpus}
        else:
            text = synth.csv_log(times, tokens_per_step=tokens_step)
            ext = "csv"
        name = f"{prefix}_{rid}.{ext}"
        (out / name).write_text(text, encoding="utf-8")
        manifest["runs"].append({"id": rid, "file": name, "format": fmt, "scenario": doc, "parse": extra,
                                 "true_step_time_s": t, "mfu_at_true_step": model_tf / t / (ctx.peak / 1e12)})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")


def main() -> None:
    h100_runs = [
        ("llama70b-128gpu-bf16", "megatron", _doc(H100_FLEET, LLAMA_70B, 128, 128, 1, "bf16", 8, 4, vpp=5)),
        ("gpt22b-64gpu-bf16", "nemo", _doc(H100_FLEET, GPT_22B, 64, 128, 1, "bf16", 8, 2)),
        ("llama7b-64gpu-bf16", "torchtitan", _doc(H100_FLEET, LLAMA_7B, 64, 256, 1, "bf16", 1, 1, rc="none")),
        ("llama70b-128gpu-fp8", "csv", _doc(H100_FLEET, LLAMA_70B, 128, 128, 1, "fp8", 8, 4, vpp=5)),
        ("llama7b-32gpu-fp8", "csv", _doc(H100_FLEET, LLAMA_7B, 32, 128, 2, "fp8", 1, 1, rc="none")),
    ]
    write_fleet(ROOT / "tests" / "data" / "calibration", H100_FLEET, H100_NCCL, {"bf16": 0.45, "fp8": 0.42},
                h100_runs, "h100", "SYNTHETIC calibration data for an H100 NDR fleet (tests); see "
                "scripts/make_calibration_examples.py for what it resembles. Not a measurement.",
                "NVIDIA H100 80GB HBM3")
    a100_runs = [
        ("gpt22b-64gpu-bf16", "megatron", _doc(A100_FLEET, GPT_22B, 64, 64, 1, "bf16", 8, 1, attention="flash")),
        ("llama7b-64gpu-bf16", "nemo", _doc(A100_FLEET, LLAMA_7B, 64, 128, 1, "bf16", 2, 1, attention="flash")),
        ("llama7b-32gpu-bf16", "csv", _doc(A100_FLEET, LLAMA_7B, 32, 64, 1, "bf16", 1, 1, rc="full",
                                             attention="flash")),
    ]
    write_fleet(ROOT / "examples" / "calibration", A100_FLEET, A100_NCCL, {"bf16": 0.60}, a100_runs, "a100",
                "SYNTHETIC calibration demo data for a DGX A100 HDR fleet; see scripts/make_calibration_examples.py "
                "for what it resembles. Not a measurement.", "NVIDIA A100-SXM4-80GB")


if __name__ == "__main__":
    main()
