"""``make bench``: run every benchmarks/bench_*.py script and print its figures.

Each script is standalone and prints its own figures; this runner only sequences them and reports which
ones failed. Benchmarks print numbers; they do not assert on time (the suite's tests assert behaviour).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    wanted = set(argv[1:])
    scripts = sorted(p for p in HERE.glob("bench_*.py") if not wanted or p.stem in wanted)
    failed: list[str] = []
    for script in scripts:
        print(f"\n=== {script.stem} " + "=" * (70 - len(script.stem)), flush=True)
        t0 = time.perf_counter()
        code = subprocess.call([sys.executable, str(script)], cwd=HERE.parent)
        print(f"--- {script.stem}: exit {code} in {time.perf_counter() - t0:.1f} s", flush=True)
        if code:
            failed.append(script.stem)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
