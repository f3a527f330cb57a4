"""Importer for training step logs: Megatron-LM / NeMo, PyTorch / torchtitan, and plain CSV.

Recognised lines (the format is detected from the text unless ``fmt`` is given):

* Megatron-LM ``training_log``: ``iteration  120/ 500000 | consumed samples: ... | elapsed time per
  iteration (ms): 8123.4 | throughput per GPU (TFLOP/s/GPU): 402.1 | ... | global batch size: 512 |``
* NeMo (Lightning): ``... global_step: 12 | ... | train_step_timing in s: 8.12 | ...`` and the progress-bar
  form ``Epoch 0: ... global_step=12.0, ..., train_step_timing in s=8.12``
* torchtitan / PyTorch: ``step: 12  loss: 7.8  ...  tps: 6,543  tflops: 301.50  mfu: 30.48%`` (ANSI colours
  allowed); a ``step_time: 1.23s`` or ``ms/step: 1230`` field when printed, else the step time is
  ``tokens_per_step / (tps x gpus)`` from the workload the caller states (torchtitan's tps is per GPU)
* CSV: ``step,step_time_s[,tokens]`` (header optional, ``#`` comment lines allowed)

Warm-up: the first steps of a run are slow (graph capture / torch.compile, NCCL connection set-up, allocator
growth, data-loader start). ``warmup_steps="auto"`` drops the leading steps slower than
``WARMUP_FACTOR`` x the median of the steps after them (always the first logged step when it is); an integer
drops that many leading steps. What was dropped is listed in ``warmup_excluded`` and said in ``notes``.
Nothing is executed or evaluated; numbers are read with ``int``/``float``.
"""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

FORMATS = ("megatron", "nemo", "torchtitan", "csv")
WARMUP_FACTOR = 1.10  # a leading step more than 10% slower than the steady median is warm-up
MAX_STEPLOG_LINES = 2_000_000
MIN_STEADY_STEPS = 3

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MEGATRON_IT = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_MEGATRON_MS = re.compile(r"elapsed time per iteration \(ms\):\s*([^\s|]+)")
_MEGATRON_TF = re.compile(r"(?:throughput per GPU \(TFLOP/s/GPU\)|TFLOPs):\s*([^\s|]+)")
_MEGATRON_GB = re.compile(r"global batch size:\s*(\d+)")
_NEMO_TIME = re.compile(r"train_step_timing in s\s*[:=]\s*([^\s|,\]]+)")
_NEMO_STEP = re.compile(r"global_step\s*[:=]\s*([0-9.]+)")
_NEMO_IT = re.compile(r"iteration\s+(\d+)\s*/\s*\d+")
_NEMO_GB = re.compile(r"global_batch_size\s*[:=]\s*([0-9.]+)")
_TT_STEP = re.compile(r"(?<![\w/])step:\s*(\d+)\b")
_TT_TPS = re.compile(r"\btps:\s*([0-9][0-9,]*(?:\.\d+)?)")
_TT_TFLOPS = re.compile(r"\btflops:\s*([0-9][0-9,]*(?:\.\d+)?)")
_TT_MFU = re.compile(r"\bmfu:\s*([0-9.]+)%")
_TT_STEPTIME = re.compile(r"\b(?:step_time|time):\s*([0-9.]+)\s*(ms|s)?\b")
_TT_MS_STEP = re.compile(r"\bms/step:\s*([0-9.]+)")


def _float(token: str, lineno: int, what: str) -> float:
    try:
        value = float(token.replace(",", ""))
    except ValueError:
        raise ValueError(f"line {lineno}: {what} {token!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"line {lineno}: {what} {token!r} is not finite")
    return value


def _detect(lines: list[str]) -> str:
    for raw in lines[:5000]:
        line = _ANSI.sub("", raw)
        if _MEGATRON_MS.search(line):
            return "megatron"
        if _NEMO_TIME.search(line):
            return "nemo"
        if _TT_STEP.search(line) and (_TT_TPS.search(line) or _TT_STEPTIME.search(line) or _TT_MS_STEP.search(line)):
            return "torchtitan"
    for raw in lines[:50]:
        s = raw.strip()
        if s and not s.startswith("#"):
            if re.match(r"^\s*step\s*,", s, re.I) or re.match(r"^\s*\d+\s*,\s*[0-9.eE+-]+\s*(,|$)", s):
                return "csv"
            break
    raise ValueError("line 1: not a recognised step log (Megatron-LM/NeMo iteration lines, torchtitan step lines, "
                     "or CSV step,step_time_s[,tokens]); pass fmt= if the lines are there")


def _last_line(lines: list[str]) -> int:
    return max((i for i, ln in enumerate(lines, 1) if ln.strip()), default=0)


def _megatron(lines: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    last = _last_line(lines)
    for lineno, raw in enumerate(lines, 1):
        line = _ANSI.sub("", raw)
        mt = _MEGATRON_MS.search(line)
        mi = _MEGATRON_IT.search(line)
        if not mt:
            if mi and lineno == last:
                info["truncated_line"] = lineno
            elif mi:
                raise ValueError(f"line {lineno}: iteration line without 'elapsed time per iteration (ms)'")
            continue
        if not mi:
            raise ValueError(f"line {lineno}: iteration line without 'iteration N/M |'")
        ms = _float(mt.group(1), lineno, "elapsed time per iteration (ms)")
        row: dict[str, Any] = {"step": int(mi.group(1)), "step_time_s": ms / 1e3, "line": lineno}
        mf = _MEGATRON_TF.search(line)
        if mf:
            row["tflops_per_gpu"] = _float(mf.group(1), lineno, "TFLOP/s per GPU")
        mg = _MEGATRON_GB.search(line)
        if mg:
            info["global_batch"] = int(mg.group(1))
        steps.append(row)
    return steps, info


def _nemo(lines: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    for lineno, raw in enumerate(lines, 1):
        line = _ANSI.sub("", raw)
        mt = _NEMO_TIME.search(line)
        if not mt:
            continue
        ms = _NEMO_STEP.search(line) or _NEMO_IT.search(line)
        if not ms:
            raise ValueError(f"line {lineno}: train_step_timing without global_step or iteration")
        step = int(_float(ms.group(1), lineno, "global_step"))
        row: dict[str, Any] = {"step": step, "step_time_s": _float(mt.group(1), lineno, "train_step_timing"),
                               "line": lineno}
        mg = _NEMO_GB.search(line)
        if mg:
            info["global_batch"] = int(_float(mg.group(1), lineno, "global_batch_size"))
        steps.append(row)
    # the progress bar repeats a step's figures until the next step: keep the last line of each step
    dedup: dict[int, dict[str, Any]] = {}
    for r in steps:
        dedup[r["step"]] = r
    return [dedup[k] for k in sorted(dedup)], info


def _torchtitan(lines: list[str], tokens_per_step: float | None, gpus: int | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for lineno, raw in enumerate(lines, 1):
        line = _ANSI.sub("", raw)
        ms = _TT_STEP.search(line)
        if not ms or "evaluation" in line.lower():
            continue
        row: dict[str, Any] = {"step": int(ms.group(1)), "line": lineno}
        mtime = _TT_STEPTIME.search(line)
        mms = _TT_MS_STEP.search(line)
        mtps = _TT_TPS.search(line)
        if mtime:
            v = _float(mtime.group(1), lineno, "step_time")
            row["step_time_s"] = v / 1e3 if mtime.group(2) == "ms" else v
        elif mms:
            row["step_time_s"] = _float(mms.group(1), lineno, "ms/step") / 1e3
        if mtps:
            row["tokens_per_s_per_gpu"] = _float(mtps.group(1), lineno, "tps")
            if "step_time_s" not in row:
                if tokens_per_step is None or gpus is None:
                    raise ValueError(f"line {lineno}: torchtitan line gives tps but no step time; pass "
                                     "tokens_per_step= and gpus= (the workload) to convert")
                if row["tokens_per_s_per_gpu"] <= 0:
                    raise ValueError(f"line {lineno}: tps must be > 0")
                row["step_time_s"] = tokens_per_step / (row["tokens_per_s_per_gpu"] * gpus)
        mtf = _TT_TFLOPS.search(line)
        if mtf:
            row["tflops_per_gpu"] = _float(mtf.group(1), lineno, "tflops")
        mmfu = _TT_MFU.search(line)
        if mmfu:
            row["mfu"] = _float(mmfu.group(1), lineno, "mfu") / 100.0
        if "step_time_s" not in row:
            continue  # a step line without timing (e.g. a loss-only line)
        steps.append(row)
    return steps, {}


def _csv(lines: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    body = [(i, ln) for i, ln in enumerate(lines, 1) if ln.strip() and not ln.lstrip().startswith("#")]
    if not body:
        raise ValueError("line 1: empty CSV")
    cols = ["step", "step_time_s", "tokens"]
    first_no, first = body[0]
    head = next(csv.reader([first]))
    if head and not re.match(r"^\s*-?\d", head[0]):
        names = [h.strip().lower() for h in head]
        if names[:2] != ["step", "step_time_s"] or len(names) > 3 or (len(names) == 3 and names[2] != "tokens"):
            raise ValueError(f"line {first_no}: CSV header must be step,step_time_s[,tokens], got {','.join(head)}")
        cols = names
        body = body[1:]
    info: dict[str, Any] = {}
    last = _last_line(lines)
    for lineno, ln in body:
        row_vals = next(csv.reader(io.StringIO(ln)))
        if lineno == last and (len(row_vals) < 2 or not row_vals[1].strip()):
            info["truncated_line"] = lineno
            break
        if len(row_vals) < 2 or len(row_vals) > len(cols):
            raise ValueError(f"line {lineno}: expected {len(cols)} columns ({','.join(cols)}), got {len(row_vals)}")
        try:
            step = int(row_vals[0].strip())
        except ValueError:
            raise ValueError(f"line {lineno}: step {row_vals[0]!r} is not an integer") from None
        row: dict[str, Any] = {"step": step, "step_time_s": _float(row_vals[1].strip(), lineno, "step_time_s"),
                               "line": lineno}
        if len(row_vals) == 3 and row_vals[2].strip():
            tok = _float(row_vals[2].strip(), lineno, "tokens")
            if tok <= 0:
                raise ValueError(f"line {lineno}: tokens must be > 0, got {row_vals[2].strip()}")
            row["tokens"] = tok
        steps.append(row)
    return steps, info


def _warmup_count(times: list[float], warmup: int | str) -> int:
    if isinstance(warmup, int):
        return warmup
    n = len(times)
    k = 0
    while k < n - MIN_STEADY_STEPS:
        rest = sorted(times[k + 1:])
        median = rest[len(rest) // 2]
        if times[k] > WARMUP_FACTOR * median:
            k += 1
        else:
            break
    return k


def parse_step_log(text: str, fmt: str | None = None, *, warmup_steps: int | str = "auto",
                   tokens_per_step: float | None = None, gpus: int | None = None) -> dict[str, Any]:
    """Parse a training log into per-step times and the steady-state step time.

    Returns ``{"format", "steps": [{step, step_time_s, warmup, ...}], "warmup_excluded": [step, ...],
    "step_time_s" (median of the kept steps), "step_time_mean_s", "step_time_std_s", "step_time_sem_rel"
    (relative standard error of the median), "steps_used", "tflops_per_gpu" (median, when logged),
    "tokens_per_step" (when known), "global_batch" (when logged), "notes"}``.
    A malformed line raises ``ValueError("line N: reason")``.
    """
    if not isinstance(text, str):
        raise ValueError(f"line 0: expected text, got {type(text).__name__}")
    if "\x00" in text:
        raise ValueError(f"line {text[:text.index(chr(0))].count(chr(10)) + 1}: NUL byte in step log")
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"fmt: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if not (warmup_steps == "auto" or (isinstance(warmup_steps, int) and not isinstance(warmup_steps, bool)
                                       and warmup_steps >= 0)):
        raise ValueError(f"warmup_steps: must be 'auto' or an integer >= 0, got {warmup_steps!r}")
    if tokens_per_step is not None and not (isinstance(tokens_per_step, int | float) and tokens_per_step > 0):
        raise ValueError(f"tokens_per_step: must be a positive number, got {tokens_per_step!r}")
    if gpus is not None and not (isinstance(gpus, int) and gpus > 0):
        raise ValueError(f"gpus: must be a positive integer, got {gpus!r}")
    lines = text.splitlines()
    if len(lines) > MAX_STEPLOG_LINES:
        raise ValueError(f"line {MAX_STEPLOG_LINES + 1}: more than {MAX_STEPLOG_LINES} lines")
    kind = fmt or _detect(lines)
    if kind == "megatron":
        steps, info = _megatron(lines)
    elif kind == "nemo":
        steps, info = _nemo(lines)
    elif kind == "torchtitan":
        steps, info = _torchtitan(lines, tokens_per_step, gpus)
    else:
        steps, info = _csv(lines)
    if not steps:
        raise ValueError(f"line {len(lines)}: no {kind} step lines with a step time found")
    prev = None
    for r in steps:
        if r["step_time_s"] <= 0:
            raise ValueError(f"line {r['line']}: step time must be > 0, got {r['step_time_s']:g}")
        if prev is not None and r["step"] <= prev:
            raise ValueError(f"line {r['line']}: step {r['step']} does not follow step {prev} (two runs in one file?)")
        prev = r["step"]
    times = [r["step_time_s"] for r in steps]
    k = _warmup_count(times, warmup_steps)
    if len(steps) - k < 1:
        raise ValueError(f"warmup_steps: {k} warm-up steps leave none of the {len(steps)} logged steps")
    for i, r in enumerate(steps):
        r["warmup"] = i < k
    kept = [r["step_time_s"] for r in steps[k:]]
    srt = sorted(kept)
    median = srt[len(srt) // 2] if len(srt) % 2 else 0.5 * (srt[len(srt) // 2 - 1] + srt[len(srt) // 2])
    mean = sum(kept) / len(kept)
    std = math.sqrt(sum((x - mean) ** 2 for x in kept) / (len(kept) - 1)) if len(kept) > 1 else 0.0
    sem_rel = 1.2533 * std / median / math.sqrt(len(kept)) if len(kept) > 1 else float("nan")
    notes: list[str] = []
    if info.get("truncated_line"):
        notes.append(f"line {info['truncated_line']}: incomplete last line dropped (file truncated)")
    excluded = [r["step"] for r in steps[:k]]
    if excluded:
        how = "as asked" if isinstance(warmup_steps, int) else \
            f"slower than {WARMUP_FACTOR:g} x the median of the later steps"
        notes.append(f"excluded {k} warm-up step(s) {excluded[0]}-{excluded[-1]} ({how})")
    else:
        notes.append("no warm-up steps excluded")
    spikes = [r["step"] for r in steps[k:] if r["step_time_s"] > 1.5 * median]
    if spikes:
        notes.append(f"{len(spikes)} step(s) over 1.5 x the median kept (checkpoint/eval pauses?); the median ignores them")
    if len(kept) < MIN_STEADY_STEPS:
        notes.append(f"only {len(kept)} steady step(s): the step time is uncertain")
    tflops = sorted(r["tflops_per_gpu"] for r in steps[k:] if "tflops_per_gpu" in r)
    tokens = [r["tokens"] for r in steps[k:] if "tokens" in r]
    tps_step = tokens_per_step if tokens_per_step is not None else (sorted(tokens)[len(tokens) // 2] if tokens else None)
    for r in steps:
        r.pop("line", None)
    return {
        "format": kind,
        "steps": steps,
        "warmup_excluded": excluded,
        "step_time_s": median,
        "step_time_mean_s": mean,
        "step_time_std_s": std,
        "step_time_sem_rel": sem_rel,
        "steps_used": len(kept),
        "tflops_per_gpu": tflops[len(tflops) // 2] if tflops else None,
        "tokens_per_step": tps_step,
        "global_batch": info.get("global_batch"),
        "notes": notes,
    }
