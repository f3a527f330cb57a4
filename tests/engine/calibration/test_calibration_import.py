"""Importers of issue #16: nccl-tests output and training step logs (tests/data/calibration is SYNTHETIC)."""

from __future__ import annotations

import json

import pytest

from engine.calibration.nccl import parse_nccl_tests
from engine.calibration.steplog import parse_step_log
from engine.calibration.synth import (
    csv_log,
    megatron_log,
    nccl_tests_text,
    step_times,
    torchtitan_log,
)
from tests import paths

DATA = paths.DATA / "calibration"
MANIFEST = json.loads((DATA / "manifest.json").read_text(encoding="utf-8"))


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _first_row_index(lines: list[str]) -> int:
    return next(i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#"))


# ----------------------------------------------------------------------------------------------- nccl-tests


@pytest.mark.parametrize("entry", MANIFEST["nccl"], ids=lambda e: e["file"])
def test_shipped_nccl_files_parse_with_header_device_list_and_both_columns(entry: dict) -> None:
    d = parse_nccl_tests(_read(entry["file"]))
    assert d["collective"] == entry["collective"]
    assert d["collective_source"] == "header"
    assert d["ranks"] == entry["ranks"]
    assert d["nodes"] == max(1, entry["ranks"] // 8)
    assert d["gpus_per_node"] == min(8, entry["ranks"])
    assert d["nccl_version"] == "2.21.5"  # nccl-library=22105
    assert d["complete"] is True and d["warnings"] == []
    sizes = {r["size_bytes"] for r in d["rows"]}
    assert len(d["rows"]) == 2 * len(sizes)  # one out-of-place and one in-place row per size
    assert sum(r["in_place"] for r in d["rows"]) == len(sizes)
    big = [r for r in d["rows"] if r["size_bytes"] >= 1 << 20]
    for r in big:  # the table's own units: GB/s = bytes / us / 1e3
        assert r["algbw_gbytes_s"] == pytest.approx(r["size_bytes"] / r["time_us"] / 1e3, rel=0.01)


def test_collective_argument_overrides_and_unknown_names_are_refused() -> None:
    text = _read("h100_all_reduce_16ranks.txt")
    assert parse_nccl_tests(text, collective="allreduce")["collective_source"] == "argument"
    assert parse_nccl_tests(text, collective="reduce_scatter_perf")["collective"] == "reduce_scatter"
    with pytest.raises(ValueError, match="collective"):
        parse_nccl_tests(text, collective="broadcast")


def _strip_program(text: str) -> str:
    return "\n".join(ln for ln in _lines(text) if "Collective test" not in ln)


@pytest.mark.parametrize("name,expected", [("h100_all_reduce_16ranks.txt", "all_reduce"),
                                           ("h100_reduce_scatter_32ranks.txt", "reduce_scatter"),
                                           ("h100_sendrecv_16ranks.txt", "sendrecv")])
def test_collective_from_column_set_when_the_header_does_not_name_it(name: str, expected: str) -> None:
    d = parse_nccl_tests(_strip_program(_read(name)))
    assert (d["collective"], d["collective_source"]) == (expected, "columns")


def test_all_gather_and_alltoall_are_indistinguishable_without_header() -> None:
    with pytest.raises(ValueError, match="collective="):
        parse_nccl_tests(_strip_program(_read("h100_all_gather_32ranks.txt")))
    assert parse_nccl_tests(_strip_program(_read("h100_all_gather_32ranks.txt")),
                            collective="all_gather")["ranks"] == 32


def test_file_cut_inside_a_row_is_refused_with_its_line_number_or_dropped_on_request() -> None:
    lines = _lines(_read("h100_all_reduce_64ranks.txt"))
    first = _first_row_index(lines)
    cut = [*lines[: first + 10], lines[first + 10][:70]]  # the job died while printing a row
    text = "\n".join(cut) + "\n"
    with pytest.raises(ValueError, match=rf"^line {first + 11}: .*truncated"):
        parse_nccl_tests(text)
    d = parse_nccl_tests(text, allow_truncated=True)
    assert len(d["rows"]) == 2 * 10
    assert d["complete"] is False
    assert any("partial last row dropped" in w for w in d["warnings"])


def test_file_cut_between_rows_reads_what_is_there_and_says_it_is_incomplete() -> None:
    lines = _lines(_read("h100_all_reduce_16ranks.txt"))
    first = _first_row_index(lines)
    d = parse_nccl_tests("\n".join(lines[: first + 5]))
    assert len(d["rows"]) == 10 and d["complete"] is False
    assert any("Avg bus bandwidth" in w for w in d["warnings"])


def test_malformed_value_names_the_line() -> None:
    lines = _lines(_read("h100_all_reduce_16ranks.txt"))
    i = _first_row_index(lines) + 3
    lines[i] = lines[i].replace("float     sum      -1    ", "float     sum      -1    x")
    with pytest.raises(ValueError, match=rf"^line {i + 1}: time 'x"):
        parse_nccl_tests("\n".join(lines))


def test_shifted_columns_are_caught_by_the_size_time_bandwidth_identity() -> None:
    lines = _lines(_read("h100_all_reduce_16ranks.txt"))
    i = len(lines) - 8  # a large-message row
    f = lines[i].split()
    f[6], f[7] = f[7], f[6]  # algbw and busbw swapped
    lines[i] = "  ".join(f)
    with pytest.raises(ValueError, match=rf"^line {i + 1}: algbw"):
        parse_nccl_tests("\n".join(lines))


def test_mixed_in_place_only_rows_of_trace_replay() -> None:
    text = nccl_tests_text("all_reduce", 8, 8, [1 << 20, 1 << 22], [20.0, 50.0], [19.0, 49.0])
    lines = _lines(text)
    i = _first_row_index(lines)
    # the out-of-place block replaced by 32 blanks on the second row, as trace replay prints it
    head, _, _ = lines[i + 1].partition("      -1")
    tail = lines[i + 1].split()[-4:]
    lines[i + 1] = head + "      -1" + " " * 32 + "  ".join(f"{x:>7s}" for x in tail)
    d = parse_nccl_tests("\n".join(lines))
    assert [(r["size_bytes"], r["in_place"]) for r in d["rows"]] == [(1 << 20, False), (1 << 20, True), (1 << 22, True)]
    assert d["rows"][-1]["time_us"] == pytest.approx(49.0)


def test_old_release_layout_without_root_column_and_nccl_debug_lines() -> None:
    rows = [
        "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20 validation: 1",
        "dgx01:1234:1234 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>",
        "dgx01:1234:1234 [0] NCCL INFO NCCL version 2.8.4+cuda11.2",
        "#",
        "#                                                     out-of-place                       in-place",
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
        "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
        "     1048576        262144   float     sum    29.10   36.03   63.06  2e-07    28.90   36.28   63.50  2e-07",
        "     2097152        524288   float     sum    42.50   49.34   86.35  2e-07    42.20   49.70   86.97  2e-07",
        "dgx01:1234:1240 [3] NCCL INFO comm 0x55d0 rank 3 nranks 8 - Init COMPLETE",
        "     4194304       1048576   float     sum    68.20   61.50  107.62  2e-07    68.00   61.68  107.94  2e-07",
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 85.9",
    ]
    d = parse_nccl_tests("\n".join(rows))
    assert d["collective"] == "all_reduce" and d["collective_source"] == "columns"
    assert d["ranks"] is None  # no device list
    assert d["nccl_version"] == "2.8.4"
    assert d["config"]["gpus_per_thread"] == 8
    assert len(d["rows"]) == 6 and all(r["wrong"] is None for r in d["rows"])  # "error" is not a count
    assert d["avg_busbw_gbytes_s"] == pytest.approx(85.9)


def test_timestamp_and_per_iteration_columns_follow_the_header() -> None:
    hdr = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max"
           "    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%  timestamp")
    row = ("     1048576        262144     float     sum      -1    29.10   36.03   63.06       0    28.00    31.00"
           "    30.90     2.10    28.90   36.28   63.50       0    28.10    30.00    29.90     1.90  2025-06-01 10:00:00")
    d = parse_nccl_tests("# Collective test starting: all_reduce_perf\n" + hdr + "\n" + row + "\n")
    assert [r["time_us"] for r in d["rows"]] == [29.10, 28.90]
    assert [r["busbw_gbytes_s"] for r in d["rows"]] == [63.06, 63.50]


def test_wrong_elements_warn_and_two_tests_in_one_file_are_refused() -> None:
    text = _read("h100_all_reduce_8ranks.txt")
    lines = _lines(text)
    i = _first_row_index(lines) + 2
    f = lines[i].rsplit(None, 1)
    lines[i] = f[0] + "  5"
    d = parse_nccl_tests("\n".join(lines))
    assert any(w.startswith(f"line {i + 1}: 5 wrong elements") for w in d["warnings"])
    both = text + _read("h100_sendrecv_16ranks.txt")
    with pytest.raises(ValueError, match="second test"):
        parse_nccl_tests(both)


@pytest.mark.parametrize("bad,match", [("", "no result rows"), ("hello world\n", "expected a nccl-tests result row"),
                                       ("# x\n\x00\n", "NUL"), ("#  size count type\n", "no result rows")])
def test_garbage_is_refused_with_a_line_number(bad: str, match: str) -> None:
    with pytest.raises(ValueError, match=rf"^line \d+: .*{match}"):
        parse_nccl_tests(bad)


# ------------------------------------------------------------------------------------------------ step logs


def _run(rid: str) -> dict:
    return next(r for r in MANIFEST["runs"] if r["id"] == rid)


@pytest.mark.parametrize("run", MANIFEST["runs"], ids=lambda r: r["id"])
def test_shipped_step_logs_exclude_warm_up_and_recover_the_steady_step_time(run: dict) -> None:
    d = parse_step_log(_read(run["file"]), **run["parse"])
    assert d["format"] == run["format"]
    assert d["warmup_excluded"] == [d["steps"][0]["step"], d["steps"][1]["step"], d["steps"][2]["step"]]
    assert "excluded 3 warm-up step(s)" in d["notes"][0]
    assert [s["warmup"] for s in d["steps"][:4]] == [True, True, True, False]
    assert d["steps_used"] == 37
    assert d["step_time_s"] == pytest.approx(run["true_step_time_s"], rel=0.01)
    assert 0 < d["step_time_sem_rel"] < 0.01


def test_megatron_fields_tflops_and_global_batch() -> None:
    d = parse_step_log(_read(_run("llama70b-128gpu-bf16")["file"]))
    assert d["global_batch"] == 128
    assert d["tflops_per_gpu"] is not None and 100 < d["tflops_per_gpu"] < 989


def test_nemo_progress_bar_form_keeps_one_entry_per_step() -> None:
    text = "\n".join(
        f"Epoch 0: : {i}%|##| {s}/50 [00:10<00:00, reduced_train_loss=6.130, global_step={s}.0, "
        f"consumed_samples={s * 1536}.0, train_step_timing in s={t}]"
        for i, (s, t) in enumerate([(1, 9.0), (1, 9.0), (2, 7.0), (3, 5.9), (4, 5.91), (5, 5.89)]))
    d = parse_step_log(text)
    assert d["format"] == "nemo" and [s["step"] for s in d["steps"]] == [1, 2, 3, 4, 5]
    assert d["warmup_excluded"] == [1, 2] and d["step_time_s"] == pytest.approx(5.9)


def test_torchtitan_needs_the_workload_to_turn_tps_into_step_time() -> None:
    run = _run("llama7b-64gpu-bf16")
    text = _read(run["file"])
    with pytest.raises(ValueError, match=r"^line 2: .*tokens_per_step"):
        parse_step_log(text)
    d = parse_step_log(text, tokens_per_step=run["parse"]["tokens_per_step"], gpus=64)
    assert d["step_time_s"] == pytest.approx(run["true_step_time_s"], rel=0.01)
    # a fork that prints the step time directly needs no workload
    d2 = parse_step_log("step: 10  loss: 2.0  step_time: 1.50s  tps: 100\nstep: 20  loss: 1.9  step_time: 1.52s  tps: 99\n")
    assert [s["step_time_s"] for s in d2["steps"]] == [1.5, 1.52]


def test_torchtitan_tps_is_per_gpu() -> None:
    text = torchtitan_log([2.0, 2.0, 2.0, 2.0], tokens_per_step=1_048_576, gpus=64)
    d = parse_step_log(text, tokens_per_step=1_048_576, gpus=64, warmup_steps=0)
    assert d["step_time_s"] == pytest.approx(2.0, rel=1e-3)


def test_csv_with_and_without_header_and_tokens() -> None:
    d = parse_step_log("step,step_time_s,tokens\n1,9.5,1048576\n2,4.1,1048576\n3,4.0,1048576\n4,4.05,1048576\n"
                       "5,3.98,1048576\n")
    assert d["format"] == "csv" and d["tokens_per_step"] == 1048576 and d["warmup_excluded"] == [1]
    d = parse_step_log("1,2.0\n2,2.0\n3,2.1\n4,1.9\n", warmup_steps=0)
    assert d["warmup_excluded"] == [] and d["notes"][0] == "no warm-up steps excluded"


@pytest.mark.parametrize("text,match", [
    ("step,time\n1,2.0\n", r"^line 1: CSV header must be step,step_time_s"),
    ("step,step_time_s\n1,2.0\n2,abc\n3,2.0\n", r"^line 3: step_time_s 'abc' is not a number"),
    ("step,step_time_s\n1,2.0\n2,-1\n3,2.0\n", r"^line 3: step time must be > 0"),
    ("step,step_time_s\n1,2.0\nx,2.0\n3,2.0\n", r"^line 3: step 'x' is not an integer"),
    ("step,step_time_s\n1,2.0\n2,2.0,5,6\n", r"^line 3: expected 2 columns"),
    ("step,step_time_s\n1,2.0\n5,2.0\n3,2.0\n", r"^line 4: step 3 does not follow step 5"),
    ("just some text\n", r"^line 1: not a recognised step log"),
])
def test_malformed_step_logs_name_the_line(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_step_log(text)


def test_truncated_logs_drop_the_incomplete_last_line_and_say_so() -> None:
    times = step_times(2.0, 12, seed=3)
    text = csv_log(times) + "13,"
    d = parse_step_log(text)
    assert d["steps"][-1]["step"] == 12 and any("truncated" in n for n in d["notes"])
    meg = megatron_log(times, global_batch=64)
    cut = meg + " [2025-06-01 10:00:13] iteration       13/  500000 | consumed samples:          832 | elapsed ti"
    d = parse_step_log(cut)
    assert len(d["steps"]) == 12 and any("truncated" in n for n in d["notes"])
    broken = meg.replace("elapsed time per iteration (ms)", "elapsed time", 1)
    with pytest.raises(ValueError, match=r"^line 2: iteration line without 'elapsed time per iteration"):
        parse_step_log(broken)


def test_warm_up_argument_is_validated_and_applied() -> None:
    text = csv_log(step_times(1.0, 10, warmup=0, seed=1))
    assert parse_step_log(text, warmup_steps=4)["warmup_excluded"] == [1, 2, 3, 4]
    assert "as asked" in parse_step_log(text, warmup_steps=4)["notes"][0]
    with pytest.raises(ValueError, match="warmup_steps"):
        parse_step_log(text, warmup_steps=10)
    with pytest.raises(ValueError, match="warmup_steps"):
        parse_step_log(text, warmup_steps=-1)
    with pytest.raises(ValueError, match="fmt"):
        parse_step_log(text, fmt="excel")


# ------------------------------------------------------------------------------------- telemetry (optional)


def test_nvidia_smi_csv_power_and_busy_per_gpu() -> None:
    from engine.calibration.telemetry import parse_gpu_telemetry

    text = ("timestamp, index, name, power.draw [W], utilization.gpu [%]\n"
            "2025/06/01 10:00:00.000, 0, NVIDIA H100 80GB HBM3, 650.00 W, 100 %\n"
            "2025/06/01 10:00:00.000, 1, NVIDIA H100 80GB HBM3, 610.00 W, 90 %\n"
            "2025/06/01 10:00:01.000, 0, NVIDIA H100 80GB HBM3, 670.00 W, 100 %\n"
            "2025/06/01 10:00:01.000, 1, NVIDIA H100 80GB HBM3, [N/A], 80 %\n")
    d = parse_gpu_telemetry(text)
    assert d["source"] == "nvidia-smi" and d["gpus"] == 2 and d["samples"] == 4
    assert d["per_gpu"][0]["power_w"] == pytest.approx(660.0)
    assert d["per_gpu"][1]["power_w"] == pytest.approx(610.0)  # N/A skipped
    assert d["mean_gpu_busy"] == pytest.approx(0.925)
    with pytest.raises(ValueError, match=r"^line 3: power.draw 'lots' is not a number"):
        parse_gpu_telemetry(text.replace("610.00 W", "lots"))


def test_dcgmi_dmon_power_and_sm_activity() -> None:
    from engine.calibration.telemetry import parse_gpu_telemetry

    text = ("#Entity   POWER   SMACT\nID        W\nGPU 0     650.1   0.812\nGPU 1     640.3   0.790\n"
            "GPU 0     655.0   0.820\n")
    d = parse_gpu_telemetry(text)
    assert d["source"] == "dcgmi dmon" and d["gpus"] == 2
    assert d["per_gpu"][0]["sm_active"] == pytest.approx(0.816)
    assert d["mean_power_w"] == pytest.approx((650.1 + 640.3 + 655.0) / 3)
    with pytest.raises(ValueError, match=r"^line 4: SMACT 79 is a ratio"):
        parse_gpu_telemetry(text.replace("0.790", "79"))
    with pytest.raises(ValueError, match=r"^line 1: not nvidia-smi"):
        parse_gpu_telemetry("hello\n")


# ------------------------------------------------------------------------------------ hostile / random input
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from engine.calibration.telemetry import parse_gpu_telemetry  # noqa: E402

_SHIPPED = sorted(p.name for p in DATA.iterdir() if p.suffix in (".txt", ".log", ".csv"))


def _only_value_errors(fn: object, text: str, **kw: object) -> None:
    try:
        out = fn(text, **kw)  # type: ignore[operator]
    except ValueError as exc:
        assert str(exc).startswith("line ") or ":" in str(exc).split(" ")[0], exc  # says where or which field
    else:
        assert isinstance(out, dict)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_random_text_is_refused_cleanly_by_every_importer(text: str) -> None:
    for fn in (parse_nccl_tests, parse_step_log, parse_gpu_telemetry):
        _only_value_errors(fn, text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(_SHIPPED), data=st.data())
def test_damaged_real_files_are_read_or_refused_never_crash(name: str, data: st.DataObject) -> None:
    """Cut, drop a line, flip a character or insert junk in a shipped file: a dict or a ValueError, nothing else."""
    lines = _read(name).splitlines()
    i = data.draw(st.integers(0, len(lines) - 1))
    how = data.draw(st.sampled_from(["cut", "drop", "flip", "junk"]))
    if how == "cut":
        lines = [*lines[:i], lines[i][: data.draw(st.integers(0, len(lines[i])))]]
    elif how == "drop":
        del lines[i]
    elif how == "flip" and lines[i]:
        j = data.draw(st.integers(0, len(lines[i]) - 1))
        lines[i] = lines[i][:j] + data.draw(st.characters()) + lines[i][j + 1:]
    else:
        lines.insert(i, data.draw(st.text(max_size=60)))
    text = "\n".join(lines)
    fn = parse_nccl_tests if name.endswith(".txt") else parse_step_log
    kw = {"tokens_per_step": 1048576, "gpus": 64} if fn is parse_step_log else {}
    _only_value_errors(fn, text, **kw)


def test_a_header_cut_after_busbw_is_refused_with_its_line() -> None:
    """Found by the property test (issue #23): the 16-rank file cut inside its column header, right after the
    first ``busbw``, raised IndexError. It is a header that lacks the #wrong column, so the rows that the
    file no longer has cannot be read: a line-numbered ValueError, never a crash."""
    lines = _read("h100_all_reduce_16ranks.txt").splitlines()
    at = next(i for i, line in enumerate(lines) if "busbw" in line)
    cut = lines[at][: lines[at].index("busbw") + len("busbw")]
    for text in ("\n".join([*lines[:at], cut]), "\n".join([*lines[:at], cut, *lines[at + 1:]])):
        try:
            out = parse_nccl_tests(text)
        except ValueError as exc:
            assert str(exc).startswith("line "), exc
        else:
            assert out["rows"], out
