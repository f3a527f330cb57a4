"""Optional GPU telemetry importer: power and SM activity only (issue #16).

* ``nvidia-smi --query-gpu=timestamp,index,power.draw,utilization.gpu --format=csv`` (any column order; the
  header names the fields, units in brackets; ``noheader`` files must pass ``columns=``);
* ``dcgmi dmon -e 155,1002`` (DCGM_FI_DEV_POWER_USAGE as ``POWER`` in W, DCGM_FI_PROF_SM_ACTIVE as ``SMACT``
  as a 0-1 ratio), rows ``GPU <id> <values>``.

Returns per-GPU and overall means: ``power_w`` and ``sm_active`` (0-1; from SMACT, or nvidia-smi's
``utilization.gpu``, which only says a kernel was running, reported as ``gpu_busy`` instead). These inform
the energy side and sanity-check a run (a GPU at 30% SM activity is not GEMM bound); they are not fitted.
"""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

MAX_TELEMETRY_LINES = 2_000_000
_DMON_ROW = re.compile(r"^\s*GPU\s+(\d+)\s+(.*)$")


def _value(token: str, lineno: int, what: str) -> float | None:
    t = token.strip()
    if t.upper() in ("N/A", "[N/A]", "[NOT SUPPORTED]", ""):
        return None
    t = re.sub(r"\s*(W|%)$", "", t)
    try:
        v = float(t)
    except ValueError:
        raise ValueError(f"line {lineno}: {what} {token.strip()!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"line {lineno}: {what} {token.strip()!r} must be a finite number >= 0")
    return v


def _summary(samples: dict[int, dict[str, list[float]]], source: str) -> dict[str, Any]:
    per_gpu = {}
    pooled: dict[str, list[float]] = {}
    for gpu, fields in sorted(samples.items()):
        per_gpu[gpu] = {k: sum(v) / len(v) for k, v in fields.items() if v}
        for k, v in fields.items():
            pooled.setdefault(k, []).extend(v)
    overall = {k: sum(v) / len(v) for k, v in pooled.items() if v}
    rows = sum(max(len(v) for v in fields.values()) for fields in samples.values())
    return {"source": source, "gpus": len(per_gpu), "samples": rows, "per_gpu": per_gpu,
            **{f"mean_{k}": v for k, v in overall.items()}}


def parse_gpu_telemetry(text: str) -> dict[str, Any]:
    """Parse nvidia-smi CSV or dcgmi dmon output; ``ValueError("line N: reason")`` when malformed."""
    if not isinstance(text, str):
        raise ValueError(f"line 0: expected text, got {type(text).__name__}")
    if "\x00" in text:
        raise ValueError("line 1: NUL byte in telemetry")
    lines = text.splitlines()
    if len(lines) > MAX_TELEMETRY_LINES:
        raise ValueError(f"line {MAX_TELEMETRY_LINES + 1}: more than {MAX_TELEMETRY_LINES} lines")
    first = next(((i, ln) for i, ln in enumerate(lines, 1) if ln.strip() and not ln.startswith("# SYNTHETIC")),
                 (0, ""))
    if first[1].lstrip().startswith("#") and "Entity" in first[1]:
        return _dmon(lines)
    if "power.draw" in first[1] or "utilization.gpu" in first[1] or "index" in first[1]:
        return _smi(lines, first[0])
    raise ValueError(f"line {first[0] or 1}: not nvidia-smi --format=csv output (header with power.draw / "
                     "utilization.gpu) nor dcgmi dmon output (#Entity header)")


def _smi(lines: list[str], header_line: int) -> dict[str, Any]:
    header = [h.strip().split(" [")[0] for h in next(csv.reader([lines[header_line - 1]]))]
    if "index" not in header:
        raise ValueError(f"line {header_line}: nvidia-smi CSV needs the index column to tell GPUs apart")
    cols = {"power.draw": "power_w", "utilization.gpu": "gpu_busy"}
    if not any(c in header for c in cols):
        raise ValueError(f"line {header_line}: no power.draw or utilization.gpu column")
    samples: dict[int, dict[str, list[float]]] = {}
    for lineno in range(header_line + 1, len(lines) + 1):
        raw = lines[lineno - 1]
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        row = next(csv.reader(io.StringIO(raw)))
        if len(row) != len(header):
            raise ValueError(f"line {lineno}: expected {len(header)} columns, got {len(row)}")
        try:
            gpu = int(row[header.index("index")].strip())
        except ValueError:
            raise ValueError(f"line {lineno}: GPU index {row[header.index('index')].strip()!r} is not an integer") from None
        for col, key in cols.items():
            if col in header:
                v = _value(row[header.index(col)], lineno, col)
                if v is not None:
                    samples.setdefault(gpu, {}).setdefault(key, []).append(v / 100.0 if key == "gpu_busy" else v)
    if not samples:
        raise ValueError(f"line {len(lines)}: no samples")
    return _summary(samples, "nvidia-smi")


def _dmon(lines: list[str]) -> dict[str, Any]:
    header: list[str] | None = None
    samples: dict[int, dict[str, list[float]]] = {}
    keys = {"POWER": "power_w", "SMACT": "sm_active"}
    for lineno, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        if s.startswith("#"):
            if "Entity" in s:
                header = s.lstrip("#").split()[1:]
                if not any(k in header for k in keys):
                    raise ValueError(f"line {lineno}: dcgmi dmon header has neither POWER (155) nor SMACT (1002)")
            continue
        m = _DMON_ROW.match(raw)
        if not m:
            if s.split()[0] in ("ID", "Id"):
                continue  # the units line
            raise ValueError(f"line {lineno}: expected 'GPU <id> <values>'")
        if header is None:
            raise ValueError(f"line {lineno}: data before the #Entity header")
        vals = m.group(2).split()
        if len(vals) != len(header):
            raise ValueError(f"line {lineno}: expected {len(header)} values, got {len(vals)}")
        gpu = int(m.group(1))
        for tag, key in keys.items():
            if tag in header:
                v = _value(vals[header.index(tag)], lineno, tag)
                if v is not None:
                    if key == "sm_active" and v > 1.0:
                        raise ValueError(f"line {lineno}: SMACT {v:g} is a ratio and must be <= 1")
                    samples.setdefault(gpu, {}).setdefault(key, []).append(v)
    if not samples:
        raise ValueError(f"line {len(lines)}: no GPU samples")
    return _summary(samples, "dcgmi dmon")
