"""``make run``: the web server plus a Celery worker and beat, side by side, in one terminal.

Embedded mode (no REDIS_URL) uses the SQLite-backed broker, so nothing else needs to be running.
Ctrl-C stops all three. Used only for local development; production runs gunicorn, ``celery worker``
and ``celery beat`` as separate processes (see docker-compose.yml and deploy/).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    host = os.environ.get("FP_HOST", "127.0.0.1")
    port = os.environ.get("FP_PORT", "8000")
    py = sys.executable
    procs = {
        "worker": [py, "-m", "celery", "-A", "planner", "worker", "-Q", "default,simulations", "-c", "2",
                   "-l", "INFO", "-n", "dev@%h"],
        "beat": [py, "-m", "celery", "-A", "planner", "beat", "-l", "INFO",
                 "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler"],
        "web": [py, "manage.py", "runserver", f"{host}:{port}", "--noreload"],
    }
    running: dict[str, subprocess.Popen[bytes]] = {}
    for name, cmd in procs.items():
        running[name] = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
    print(f"Fabric Planner: portal http://{host}:{port}/  API docs http://{host}:{port}/api/docs/", flush=True)

    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    code = 0
    while not stopping:
        for name, proc in running.items():
            if proc.poll() is not None:
                print(f"{name} exited with {proc.returncode}; stopping", file=sys.stderr, flush=True)
                code = proc.returncode or 1
                stopping = True
        time.sleep(0.5)
    # SIGTERM to each main process only: celery's warm shutdown then stops its own pool children. Signalling
    # the whole process group would kill the children first and the worker would log
    # "ERROR ... exited with signal 15 (SIGTERM)" on every normal stop.
    for proc in running.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in running.values():
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
