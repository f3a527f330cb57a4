"""Importer for the text output of NVIDIA's nccl-tests (``all_reduce_perf``, ``all_gather_perf``, ...).

The format (nccl-tests 2.x, ``src/util.cu``; older releases differ only in the columns they print)::

    # nccl-tests version 2.17.6 nccl-headers=22803 nccl-library=22803
    # Collective test starting: all_reduce_perf
    # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 ...
    #
    # Using devices
    #  Rank  0 Group  0 Pid  12345 on     node01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
    ...
    #                                                              out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
               8             2     float     sum      -1    26.54    0.00    0.00      0    26.21    0.00    0.00      0
    ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 45.1234

Columns are located from the file's own header line (``size count type redop [root] time algbw busbw
#wrong|error ...``, with optional per-iteration ``i_min i_max i_p99 i_cv%`` columns and a timestamp); a file
without that header is read by position (old layout without ``root`` when a row has 11 fields). Lines that
NCCL itself prints (``NCCL INFO``/``NCCL WARN`` debug output, interleaved by MPI) are skipped; the NCCL version
is taken from them when present. Nothing is executed or evaluated: every value is read with ``int``/``float``.
"""

from __future__ import annotations

import math
import re
from typing import Any

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
_ALIASES = {
    "all_reduce": "all_reduce", "allreduce": "all_reduce", "ar": "all_reduce",
    "all_gather": "all_gather", "allgather": "all_gather", "ag": "all_gather",
    "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter", "rs": "reduce_scatter",
    "alltoall": "alltoall", "all_to_all": "alltoall", "a2a": "alltoall",
    "sendrecv": "sendrecv", "send_recv": "sendrecv", "p2p": "sendrecv",
}
# bus bandwidth / algorithm bandwidth for n ranks (nccl-tests doc/PERFORMANCE.md)
BUS_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "sendrecv": lambda n: 1.0,
}
# element size in bytes of the nccl-tests type names
TYPE_BYTES = {
    "int8": 1, "uint8": 1, "char": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "half": 2, "float16": 2, "bfloat16": 2, "float": 4, "float32": 4, "double": 8, "float64": 8,
    "f8e4m3": 1, "f8e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
}
MAX_NCCL_LINES = 200_000  # a nccl-tests sweep has < 100 rows; refuse pathological inputs early

_PROGRAM = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|sendrecv)_perf\b")
_NCCL_VERSION = re.compile(r"NCCL version\s+(\d+\.\d+\.\d+)")
_TESTS_VERSION = re.compile(r"nccl-tests version\s+(\S+)(?:\s+nccl-headers=(\d+))?(?:\s+nccl-library=(\d+))?")
_DEVICE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+Group\s+(\d+)\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$"
)
_CONFIG = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)(.*)$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}$")
_BLANK_BLOCK = re.compile(r"\S {30,}\S")
_NCCL_LOG = re.compile(r"\bNCCL (INFO|WARN|TRACE)\b")


def _normalise(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    key = key[:-5] if key.endswith("_perf") else key
    if key not in _ALIASES:
        raise ValueError(f"collective: unknown collective {name!r}; expected one of {', '.join(COLLECTIVES)}")
    return _ALIASES[key]


def _version_from_code(code: str | None) -> str | None:
    """NCCL_VERSION_CODE 22803 -> '2.28.3' (major*10000 + minor*100 + patch since NCCL 2.9)."""
    if not code:
        return None
    v = int(code)
    if v >= 10000:
        return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"


def _num(token: str, lineno: int, what: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise ValueError(f"line {lineno}: {what} {token!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"line {lineno}: {what} {token!r} is not finite")
    return value


class _Layout:
    """Column positions of one results table (from its header, or the default of the running version)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        lowered = [n.lower() for n in names]
        for required in ("size", "count", "type", "redop"):
            if required not in lowered:
                raise KeyError(required)
        self.size = lowered.index("size")
        self.count = lowered.index("count")
        self.type = lowered.index("type")
        self.redop = lowered.index("redop")
        self.root = lowered.index("root") if "root" in lowered else None
        timings = [i for i, n in enumerate(lowered) if n in ("time", "cputime")]
        if not timings or len(timings) > 2:
            raise KeyError("time")
        self.blocks = [(t, t + 1, t + 2) for t in timings]  # (time, algbw, busbw) out-of-place then in-place
        for _t, a, b in self.blocks:
            if lowered[a:a + 1] != ["algbw"] or lowered[b:b + 1] != ["busbw"]:
                raise KeyError("algbw/busbw")
        self.cputime = lowered[timings[0]] == "cputime"
        # "#wrong" counts wrong elements; releases before 2.10 printed "error", the max relative error
        self.wrong_is_count = lowered[self.blocks[0][2] + 1:self.blocks[0][2] + 2] == ["#wrong"]
        self.trailing_timestamp = lowered[-1] == "timestamp"
        self.width = len(names) - (1 if self.trailing_timestamp else 0)


_DEFAULT_NEW = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                "time", "algbw", "busbw", "#wrong"]
_DEFAULT_OLD = ["size", "count", "type", "redop", "time", "algbw", "busbw", "error",
                "time", "algbw", "busbw", "error"]


def _header_names(line: str) -> list[str] | None:
    body = line.lstrip("#").split()
    if len(body) >= 8 and body[0].lower() == "size" and "count" in (b.lower() for b in body):
        return body
    return None


def parse_nccl_tests(text: str, collective: str | None = None, *, allow_truncated: bool = False) -> dict[str, Any]:
    """Parse the stdout of one nccl-tests run.

    Returns ``{"collective", "collective_source", "ranks", "nodes", "gpus_per_node", "gpu_name",
    "nccl_version", "nccl_tests_version", "dtype", "redop", "config", "rows", "avg_busbw_gbytes_s",
    "complete", "warnings"}``; each row is ``{"size_bytes", "count", "time_us", "algbw_gbytes_s",
    "busbw_gbytes_s", "in_place", "wrong"}`` (one row for the out-of-place and one for the in-place column
    of every size that has them). ``ranks`` comes from the ``# Using devices`` list (None without it).

    A malformed file raises ``ValueError("line N: reason")``. A file cut at a line boundary (no
    ``Avg bus bandwidth`` footer) is read with ``complete=False`` and a warning; a file cut inside a row is
    refused unless ``allow_truncated=True``, which drops that last partial row and says so.
    """
    if not isinstance(text, str):
        raise ValueError(f"line 0: expected text, got {type(text).__name__}")
    if "\x00" in text:
        raise ValueError(f"line {text[:text.index(chr(0))].count(chr(10)) + 1}: NUL byte in nccl-tests output")
    lines = text.splitlines()
    if len(lines) > MAX_NCCL_LINES:
        raise ValueError(f"line {MAX_NCCL_LINES + 1}: more than {MAX_NCCL_LINES} lines; not a single nccl-tests run")
    forced = _normalise(collective) if collective is not None else None

    program: str | None = None
    nccl_version: str | None = None
    tests_version: str | None = None
    config: dict[str, Any] = {}
    devices: list[dict[str, Any]] = []
    layout: _Layout | None = None
    rows: list[dict[str, Any]] = []
    types: set[str] = set()
    redops: set[str] = set()
    avg_busbw: float | None = None
    warnings: list[str] = []
    data_lines: list[tuple[int, list[str], str]] = []
    last_nonblank = max((i for i, ln in enumerate(lines, 1) if ln.strip()), default=0)

    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if _NCCL_LOG.search(line):
            m = _NCCL_VERSION.search(line)
            if m and nccl_version is None:
                nccl_version = m.group(1)
            continue
        if line.lstrip().startswith("#"):
            m = _TESTS_VERSION.search(line)
            if m:
                tests_version = m.group(1)
                nccl_version = nccl_version or _version_from_code(m.group(3) or m.group(2))
            m = _NCCL_VERSION.search(line)
            if m:
                nccl_version = m.group(1)
            m = _PROGRAM.search(line)
            if m:
                if data_lines and "starting" in line:
                    raise ValueError(f"line {lineno}: a second test ({m.group(1)}_perf) starts after "
                                     f"{program or 'earlier'} results; give one run per file")
                program = program or m.group(1)
            m = _CONFIG.match(line.strip())
            if m:
                config = {"threads": int(m.group(1)), "gpus_per_thread": int(m.group(2)),
                          "min_bytes": int(m.group(3)), "max_bytes": int(m.group(4))}
                for key, pat in (("warmup_iters", r"warmup iters:\s*(\d+)"), ("iters", r"\biters:\s*(\d+)"),
                                 ("graph", r"graph:\s*(\d+)"), ("validation", r"validation:\s*(\d+)")):
                    mm = re.search(pat, m.group(5))
                    if mm:
                        config[key] = int(mm.group(1))
            m = _DEVICE.match(line.strip())
            if m:
                devices.append({"rank": int(m.group(1)), "host": m.group(4), "device": int(m.group(5)),
                                "gpu_name": m.group(7).strip()})
            names = _header_names(line)
            if names is not None:
                try:
                    layout = _Layout(names)
                except KeyError as exc:
                    raise ValueError(f"line {lineno}: results header lacks the {exc.args[0]} column") from None
            m = re.search(r"Avg bus bandwidth\s*:\s*(\S+)", line)
            if m:
                avg_busbw = _num(m.group(1), lineno, "average bus bandwidth")
            continue
        data_lines.append((lineno, line.split(), line))

    if not data_lines:
        raise ValueError(f"line {len(lines)}: no result rows found (is this nccl-tests output?)")

    for lineno, fields, raw_line in data_lines:
        if layout is None:
            n = len(fields)
            if n in (13, 15) and not (n == 15 and not _CLOCK.match(fields[-1])):
                layout = _Layout(_DEFAULT_NEW + (["timestamp"] if n == 15 else []))
            elif n == 12:
                layout = _Layout(_DEFAULT_OLD)
            else:
                raise ValueError(f"line {lineno}: expected a nccl-tests result row (size count type redop root "
                                 f"time algbw busbw #wrong ...), got {n} fields and no column header before it")
        width = layout.width
        body = fields
        if len(body) >= 2 and _DATE.match(body[-2]) and _CLOCK.match(body[-1]):
            body = body[:-2]  # -T timestamps: "%Y-%m-%d %H:%M:%S", two tokens
        if len(body) == width:
            blocks = layout.blocks
        elif (len(layout.blocks) == 2 and len(body) == width - (layout.blocks[1][0] - layout.blocks[0][0])
              and _BLANK_BLOCK.search(raw_line)):
            # trace replay prints 32 blanks instead of the out-of-place block: in-place values only
            blocks = [layout.blocks[0]]
        else:
            truncated = lineno == last_nonblank and len(body) < width
            if truncated and allow_truncated:
                warnings.append(f"line {lineno}: partial last row dropped (file truncated)")
                continue
            reason = " (file truncated inside a row?)" if truncated else ""
            raise ValueError(f"line {lineno}: expected {width} fields, got {len(body)}{reason}")
        in_place_only = len(blocks) == 1 and len(layout.blocks) == 2
        try:
            size = int(fields[layout.size])
            count = int(fields[layout.count])
        except ValueError:
            raise ValueError(f"line {lineno}: size and count must be integers, got "
                             f"{fields[layout.size]!r} and {fields[layout.count]!r}") from None
        if size < 0 or count < 0:
            raise ValueError(f"line {lineno}: size and count must be >= 0")
        dtype, redop = fields[layout.type], fields[layout.redop]
        types.add(dtype)
        redops.add(redop)
        for bi, (ti, ai, bb) in enumerate(blocks):
            t = _num(fields[ti], lineno, "time")
            algbw = _num(fields[ai], lineno, "algbw")
            busbw = _num(fields[bb], lineno, "busbw")
            wrong_tok = fields[bb + 1]
            wrong: float | None = None
            if layout.wrong_is_count and wrong_tok.upper() != "N/A":
                wrong = _num(wrong_tok, lineno, "#wrong")
            if size == 0:
                continue
            if t <= 0.0:
                raise ValueError(f"line {lineno}: time must be > 0 us, got {fields[ti]}")
            if algbw < 0.0 or busbw < 0.0:
                raise ValueError(f"line {lineno}: bandwidths must be >= 0")
            expect = size / t / 1e3  # GB/s from bytes and microseconds
            # printed with 2 decimals: allow the rounding, else 3% (columns shifted or units wrong)
            if abs(algbw - expect) > 0.006 + 0.03 * expect:
                raise ValueError(f"line {lineno}: algbw {algbw:g} GB/s does not match size/time = {expect:.3g} GB/s "
                                 "(columns out of place?)")
            if busbw > 2.0 * algbw + 0.011:
                raise ValueError(f"line {lineno}: busbw {busbw:g} exceeds 2 x algbw {algbw:g}, impossible for any collective")
            in_place = in_place_only or bi == 1
            rows.append({"size_bytes": size, "count": count, "time_us": t, "algbw_gbytes_s": algbw,
                         "busbw_gbytes_s": busbw, "in_place": in_place, "wrong": wrong})
            if wrong is not None and wrong > 0:
                warnings.append(f"line {lineno}: {int(wrong)} wrong elements reported ({'in' if in_place else 'out-of'}-place)")

    if not rows:
        raise ValueError(f"line {data_lines[-1][0]}: every result row has size 0")
    if len(types) > 1:
        warnings.append(f"several data types in one file: {', '.join(sorted(types))}")

    ranks = len({d["rank"] for d in devices}) if devices else None
    hosts = sorted({d["host"] for d in devices})
    nodes = len(hosts) if devices else None
    per_host = [sum(1 for d in devices if d["host"] == h) for h in hosts]
    gpus_per_node = max(per_host) if per_host else None
    gpu_names = sorted({d["gpu_name"] for d in devices if d["gpu_name"]})

    name, source = _identify(forced, program, rows, redops, types, ranks, data_lines[0][0])
    complete = avg_busbw is not None
    if not complete:
        warnings.append("no 'Avg bus bandwidth' footer: the run did not finish or the file was cut; "
                        f"{len(rows)} rows read")
    return {
        "collective": name,
        "collective_source": source,
        "ranks": ranks,
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "gpu_name": gpu_names[0] if len(gpu_names) == 1 else (", ".join(gpu_names) or None),
        "nccl_version": nccl_version,
        "nccl_tests_version": tests_version,
        "dtype": sorted(types)[0] if len(types) == 1 else sorted(types),
        "redop": sorted(redops)[0] if len(redops) == 1 else sorted(redops),
        "config": config,
        "cpu_time": bool(layout is not None and layout.cputime),
        "rows": rows,
        "avg_busbw_gbytes_s": avg_busbw,
        "complete": complete,
        "warnings": warnings,
    }


def _identify(forced: str | None, program: str | None, rows: list[dict[str, Any]], redops: set[str],
              types: set[str], ranks: int | None, first_line: int) -> tuple[str, str]:
    """The collective: the argument, else the program name in the header, else the column set."""
    if forced is not None:
        return forced, "argument"
    if program is not None:
        return program, "header"
    # column set: busbw/algbw ratio (2(n-1)/n for all-reduce, (n-1)/n for gather/scatter/alltoall, 1 for
    # sendrecv), count x type size vs size (per-rank count for gather/scatter/alltoall), and the redop
    big = [r for r in rows if r["algbw_gbytes_s"] >= 1.0]
    if not big:
        raise ValueError(f"line {first_line}: cannot tell the collective (no header naming the test and bandwidths "
                         "too small to compare); pass collective=")
    ratio = sorted(r["busbw_gbytes_s"] / r["algbw_gbytes_s"] for r in big)[len(big) // 2]
    elem = TYPE_BYTES.get(next(iter(types)).lower()) if len(types) == 1 else None
    per_rank = None
    if elem is not None:
        r0 = max(rows, key=lambda r: r["size_bytes"])
        per_rank = r0["count"] * elem < r0["size_bytes"]
    reduces = bool(redops - {"none", "-"})
    if ratio > 1.02:
        return "all_reduce", "columns"
    if ratio < 0.98:
        if reduces:
            return "reduce_scatter", "columns"
        raise ValueError(f"line {first_line}: all_gather and alltoall print the same columns; the header does not "
                         "name the test: pass collective=")
    if per_rank is False and ranks is not None and ranks > 2:
        return "sendrecv", "columns"
    raise ValueError(f"line {first_line}: busbw = algbw fits sendrecv and a 2-rank all_reduce alike; the header does "
                     "not name the test: pass collective=")
