"""The discrete-event core: one replication of a fleet over the horizon.

State changes are events on one heap (arrivals, job ends, interruptions, restarts, repairs, clusters entering
and leaving service); a scheduling pass runs after each batch of same-time events. Every change of a
GPU count is appended to a change log ``(time, row, quantity, delta)``; :mod:`.metrics` integrates it into
per-day averages once at the end, so the hot loop does no per-day bookkeeping. Equations and assumptions:
docs/fleet-model.md.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from typing import Any

from engine.fleet.dists import exponential, unit
from engine.fleet.runtime import JobOption

# event kinds
ARRIVE, END, FAIL, RESTARTED, REPAIRED, UP, DOWN = range(7)
# job states
WAIT, RUN, RESTART, SPARE, DONE = range(5)
# change-log quantities per cluster row; the fleet row (index = number of clusters) uses QUEUE and WAITING
CAP, RES, ALLOC, LOST, CKPT, REPAIR, FRAG, QUEUE, WAITING = range(9)
NQ = 9
MAX_EVENTS = 20_000_000  # a hard stop so that no plan can stall a worker (~1 min of simulation)


class Job:
    __slots__ = (
        "alloc",
        "cluster",
        "deadline",
        "elig",
        "end",
        "enq",
        "epoch",
        "first_start",
        "gpus",
        "held",
        "id",
        "interruptions",
        "key",
        "name",
        "opt",
        "options",
        "preemptions",
        "prio",
        "queue_time",
        "remaining",
        "restart_end",
        "resumed",
        "rkey",
        "route",
        "seg_end",
        "seg_start",
        "segs",
        "spare_t",
        "state",
        "stream",
        "submit",
        "team",
        "visits",
        "west",
        "work",
    )

    def __init__(self, jid: int, name: str, stream: int, team: str, gpus: int, prio: int, submit: float,
                 deadline: float | None, options: dict[int, JobOption], elig: tuple[int, ...], fifo: bool,
                 work: float = 0.0, rkey: int = 0) -> None:
        self.id, self.name, self.stream, self.team, self.gpus = jid, name, stream, team, gpus
        self.prio, self.submit, self.deadline, self.options, self.elig = prio, submit, deadline, options, elig
        self.state, self.cluster, self.alloc = WAIT, -1, []  # type: ignore[var-annotated]
        self.opt: JobOption | None = None
        self.remaining = -1.0
        self.seg_start = self.seg_end = self.restart_end = 0.0
        self.epoch = 0
        self.first_start: float | None = None
        self.end: float | None = None
        self.enq = 0.0
        self.queue_time = 0.0
        self.interruptions = self.preemptions = self.visits = 0
        self.resumed = False
        self.spare_t = 0.0
        self.key = (0 if fifo else -prio, submit, jid)
        self.held = 0  # nodes held now
        self.route: list[tuple[int, int]] | None = None  # (cluster, nodes) in preference order, built once
        self.west: dict[int, float] = {}  # expected wall days per cluster while waiting (reset on requeue)
        self.work = work  # fault-free days of a stream job (named jobs take theirs from their options)
        self.rkey = rkey  # the job's own failure stream (engine.fleet.dists): the same draws on every option
        self.segs = 0  # running segments begun so far: segment k draws 2k (time to failure) and 2k + 1 (repair?)


class Sim:
    """One replication. ``clusters``: (total GPUs, GPUs per node, pod nodes, reserved nodes, in-service day,
    retire day); ``option_for(cluster, gpus, work_days)`` builds the option of a stream job. Failures draw from
    each job's own stream (``Job.rkey``), never from a stream shared with other jobs (common random numbers)."""

    def __init__(self, horizon: float, clusters: list[tuple[int, int, int, int, float, float]], policy: str,
                 preemption: bool, depth: int, repair_days: float, option_for: Any) -> None:
        self.H = horizon
        self.C = len(clusters)
        self.gpn = [c[1] for c in clusters]
        self.total_nodes = [c[0] // c[1] for c in clusters]
        self.pod_nodes = [max(1, min(c[2], c[0] // c[1])) for c in clusters]
        self.reserved_nodes = [c[3] for c in clusters]
        self.train_nodes = [self.total_nodes[i] - self.reserved_nodes[i] for i in range(self.C)]
        self.spans = [(c[4], c[5]) for c in clusters]
        self.policy, self.preemption, self.depth = policy, preemption, depth
        self.repair_days = repair_days
        self.option_for = option_for
        self.up = [False] * self.C
        self.pod_free: list[list[int]] = [[] for _ in range(self.C)]
        self.free = [0] * self.C
        self.repairing = [0] * self.C
        self.running: list[set[int]] = [set() for _ in range(self.C)]
        self.spare_q: list[deque[int]] = [deque() for _ in range(self.C)]
        self.waiting_on = [0] * self.C  # waiting jobs eligible for each cluster
        self.frag = [0] * self.C
        self.jobs: list[Job] = []
        self.queue: list[tuple[tuple[int, float, int], int]] = []
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.log_t: list[float] = []
        self.log_k: list[int] = []
        self.log_d: list[float] = []
        self.events = 0
        self.repairs = 0
        self.new_jobs: list[int] = []
        self.freed = True
        self.last_blocked: set[int] = set()
        self.last_res: dict[int, tuple[float, int]] = {}
        self._now = 0.0  # time of the event being processed
        self.sizes: dict[int, int] = {}  # GPUs asked -> waiting jobs (the smallest bounds every scheduling pass)
        self._ends: dict[int, list[tuple[float, int]]] = {}  # per scheduling pass: expected ends per cluster

    # ------------------------------------------------------------------------------------------ plumbing

    def push(self, t: float, kind: int, a: int, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def log(self, t: float, row: int, q: int, delta: float) -> None:
        self.log_t.append(t)
        self.log_k.append(row * NQ + q)
        self.log_d.append(delta)

    def interval(self, t0: float, t1: float, row: int, q: int, level: float) -> None:
        if t1 > t0 and level:
            self.log(t0, row, q, level)
            self.log(t1, row, q, -level)

    def add_job(self, job: Job) -> None:
        self.jobs.append(job)
        if job.elig:
            self.push(job.submit, ARRIVE, job.id)

    # ------------------------------------------------------------------------------------------ clusters

    def cluster_up(self, c: int, t: float) -> None:
        gpn, pod = self.gpn[c], self.pod_nodes[c]
        nodes = self.total_nodes[c]
        pods = [pod] * (nodes // pod) + ([nodes % pod] if nodes % pod else [])
        left = self.reserved_nodes[c]
        for i in range(len(pods) - 1, -1, -1):  # the inference block takes the last pods
            take = min(left, pods[i])
            pods[i] -= take
            left -= take
        self.pod_free[c] = pods
        self.free[c] = sum(pods)
        self.up[c] = True
        self.log(t, c, CAP, nodes * gpn)
        self.log(t, c, RES, self.reserved_nodes[c] * gpn)
        self.freed = True

    def cluster_down(self, c: int, t: float) -> None:
        for jid in sorted(self.running[c]):
            self.preempt(self.jobs[jid], t)
        gpn = self.gpn[c]
        self.log(t, c, CAP, -self.total_nodes[c] * gpn)
        self.log(t, c, RES, -self.reserved_nodes[c] * gpn)
        if self.repairing[c]:
            self.log(t, c, REPAIR, -self.repairing[c] * gpn)
        self.repairing[c] = 0
        self.up[c] = False
        self.free[c] = 0
        self.pod_free[c] = []

    def place(self, c: int, n: int) -> list[list[int]] | None:
        """Whole nodes: best-fit inside one pod when the job fits a pod, else the freest pods."""
        if not self.up[c] or self.free[c] < n:
            return None
        pf = self.pod_free[c]
        if n <= self.pod_nodes[c]:
            best = -1
            for p, f in enumerate(pf):
                if f >= n and (best < 0 or f < pf[best]):
                    best = p
            if best < 0:
                return None
            pf[best] -= n
            self.free[c] -= n
            return [[best, n]]
        alloc: list[list[int]] = []
        left = n
        for p in sorted(range(len(pf)), key=lambda i: -pf[i]):
            take = min(left, pf[p])
            if take:
                alloc.append([p, take])
                pf[p] -= take
                left -= take
            if not left:
                break
        self.free[c] -= n
        return alloc

    def release(self, job: Job, t: float) -> None:
        c = job.cluster
        held = sum(n for _, n in job.alloc)
        if self.up[c]:
            for p, n in job.alloc:
                self.pod_free[c][p] += n
            self.free[c] += held
        self.log(t, c, ALLOC, -held * self.gpn[c])
        self.running[c].discard(job.id)
        job.alloc = []
        job.held = 0
        self.freed = True

    # ------------------------------------------------------------------------------------------ queue

    def enqueue(self, job: Job, t: float) -> None:
        job.state = WAIT
        job.enq = t
        job.west = {}
        job.visits += 1
        bisect.insort(self.queue, (job.key, job.id))
        self.sizes[job.gpus] = self.sizes.get(job.gpus, 0) + 1
        for c in job.elig:
            self.waiting_on[c] += 1
        self.log(t, self.C, QUEUE, 1.0)
        self.log(t, self.C, WAITING, float(job.gpus))
        self.new_jobs.append(job.id)

    def dequeue(self, job: Job, t: float) -> None:
        job.queue_time += t - job.enq
        left = self.sizes[job.gpus] - 1
        if left:
            self.sizes[job.gpus] = left
        else:
            del self.sizes[job.gpus]
        for c in job.elig:
            self.waiting_on[c] -= 1
        self.log(t, self.C, QUEUE, -1.0)
        self.log(t, self.C, WAITING, -float(job.gpus))

    def option(self, job: Job, c: int) -> JobOption:
        opt = job.options.get(c)
        if opt is None:
            opt = self.option_for(c, job.gpus, job.work)
            job.options[c] = opt
        return opt

    def est_wall(self, job: Job, opt: JobOption) -> float:
        w = job.remaining if job.remaining >= 0 else opt.work_days
        ck = (math.ceil(w / opt.interval_days) - 1) * opt.checkpoint_days if w > opt.interval_days else 0.0
        return w + ck + (opt.restart_days if job.resumed else 0.0)

    # ------------------------------------------------------------------------------------------ jobs

    def start(self, job: Job, c: int, alloc: list[list[int]], t: float) -> None:
        opt = self.option(job, c)
        self.dequeue(job, t)
        if job.first_start is None:
            job.first_start = t
            job.remaining = opt.work_days
        elif job.cluster != c and job.opt is not None and job.opt.work_days > 0:
            job.remaining = job.remaining / job.opt.work_days * opt.work_days  # same fraction left, new speed
        job.cluster, job.alloc, job.opt = c, alloc, opt
        job.held = opt.nodes
        self.running[c].add(job.id)
        self.log(t, c, ALLOC, opt.gpus)
        if job.resumed and opt.restart_days > 0:
            self.begin_restart(job, t)
        else:
            self.begin_segment(job, t)

    def begin_restart(self, job: Job, t: float) -> None:
        assert job.opt is not None
        job.state = RESTART
        job.restart_end = t + job.opt.restart_days
        self.interval(t, job.restart_end, job.cluster, LOST, job.opt.gpus)
        self.push(job.restart_end, RESTARTED, job.id, job.epoch)

    def begin_segment(self, job: Job, t: float) -> None:
        opt = job.opt
        assert opt is not None
        job.state = RUN
        job.seg_start = t
        job.seg_end = t + self.est_wall(job, opt) - (opt.restart_days if job.resumed else 0.0)
        self.push(job.seg_end, END, job.id, job.epoch)
        if opt.rate_per_day > 0:
            tf = t + exponential(job.rkey, 2 * job.segs) / opt.rate_per_day
            job.segs += 1
            if tf < job.seg_end:
                self.push(tf, FAIL, job.id, job.epoch)

    def close_segment(self, job: Job, t: float, graceful: bool) -> None:
        """Account the running segment up to ``t``: checkpoints written, work saved, work lost."""
        opt = job.opt
        assert opt is not None
        w = t - job.seg_start
        if math.isinf(opt.interval_days):
            job.remaining -= w
            return
        period = opt.interval_days + opt.checkpoint_days
        n = int(w // period)
        if n and opt.checkpoint_days > 0:
            self.interval(job.seg_start, job.seg_start + n * period, job.cluster, CKPT,
                          opt.gpus * opt.checkpoint_days / period)
        saved = n * opt.interval_days
        tail = w - n * period
        if graceful:
            saved += min(tail, opt.interval_days)
        else:
            self.interval(job.seg_start + n * period, t, job.cluster, LOST, opt.gpus)
        job.remaining = max(job.remaining - saved, 0.0)

    def finish(self, job: Job, t: float) -> None:
        opt = job.opt
        assert opt is not None
        dur = t - job.seg_start
        w = job.remaining
        k = math.ceil(w / opt.interval_days) - 1 if w > opt.interval_days else 0
        if k > 0 and dur > 0:
            self.interval(job.seg_start, t, job.cluster, CKPT, opt.gpus * k * opt.checkpoint_days / dur)
        job.remaining = 0.0
        job.state = DONE
        job.end = t
        self.release(job, t)

    def fail(self, job: Job, t: float) -> None:
        opt = job.opt
        assert opt is not None
        self.close_segment(job, t, graceful=False)
        job.interruptions += 1
        job.epoch += 1
        job.resumed = True
        c = job.cluster
        if unit(job.rkey, 2 * job.segs - 1) < opt.hardware_share and self.repair_days > 0:
            self.repairs += 1
            p = job.alloc[0][0]
            job.alloc[0][1] -= 1
            if job.alloc[0][1] == 0:
                job.alloc.pop(0)
            job.held -= 1
            gpn = self.gpn[c]
            self.log(t, c, ALLOC, -gpn)
            self.log(t, c, REPAIR, gpn)
            self.repairing[c] += 1
            self.push(t + self.repair_days, REPAIRED, c, p)
            if not self.take_spare(job, p):
                job.state = SPARE
                job.spare_t = t
                self.log(t, c, LOST, opt.gpus - gpn)
                self.spare_q[c].append(job.id)
                return
        self.begin_restart(job, t)

    def take_spare(self, job: Job, prefer: int) -> bool:
        c = job.cluster
        if self.free[c] < 1:
            return False
        pf = self.pod_free[c]
        p = prefer if pf[prefer] > 0 else next(i for i, f in enumerate(pf) if f > 0)
        pf[p] -= 1
        self.free[c] -= 1
        job.alloc.append([p, 1])
        job.held += 1
        self.log(self._now, c, ALLOC, self.gpn[c])
        return True

    def preempt(self, job: Job, t: float) -> None:
        opt = job.opt
        assert opt is not None
        c = job.cluster
        if job.state == RUN:
            self.close_segment(job, t, graceful=True)
        elif job.state == RESTART:
            self.interval(t, job.restart_end, c, LOST, -opt.gpus)
        elif job.state == SPARE:
            self.log(t, c, LOST, -(opt.gpus - self.gpn[c]))
            self.spare_q[c].remove(job.id)
        job.epoch += 1
        job.preemptions += 1
        job.resumed = True
        self.release(job, t)
        self.enqueue(job, t)
