"""Scheduling policies on top of :class:`.sim.Sim`: fifo, priority (optionally preemptive) and EASY backfill.

All three gang-schedule (a job starts only when all its nodes are free at once) in whole nodes, inside one
pod when the job fits a pod. ``fifo`` and ``priority`` are strict: the first job that cannot start blocks
every cluster it could run on (later jobs may still start on other clusters). ``backfill`` is EASY backfill:
the first blocked job gets a reservation at the earliest time enough nodes free up on its cluster (the
"shadow time", from the running jobs' expected ends); later jobs may start now if they end before the
shadow time or use only nodes the reservation does not need.
"""

from __future__ import annotations

import heapq

from engine.budget import checkpoint
from engine.fleet.sim import (
    ARRIVE,
    DOWN,
    END,
    FAIL,
    FRAG,
    LOST,
    MAX_EVENTS,
    REPAIR,
    REPAIRED,
    RESTART,
    RESTARTED,
    RUN,
    SPARE,
    UP,
    WAIT,
    Job,
    Sim,
)
from engine.schema.bounds import WorkLimitError


class ScheduledFleet(Sim):
    def run(self) -> None:
        for c, (t_in, t_out) in enumerate(self.spans):
            self.push(t_in, UP, c)
            if t_out < self.H:
                self.push(t_out, DOWN, c)
        heap = self.heap
        jobs = self.jobs
        H = self.H
        while heap and heap[0][0] <= H:
            t, _, kind, a, b = heapq.heappop(heap)
            self._now = t
            self.events += 1
            if not self.events & 4095:  # every 4,096 events: a run's time budget and cancel stop the loop
                checkpoint()
            if self.events > MAX_EVENTS:
                raise WorkLimitError("plan", f"the simulation exceeded {MAX_EVENTS:,} events; shorten the horizon "
                                     "or lower the arrival rates")
            if kind == END:
                job = jobs[a]
                if job.epoch == b and job.state == RUN:
                    self.finish(job, t)
            elif kind == ARRIVE:
                self.enqueue(jobs[a], t)
            elif kind == FAIL:
                job = jobs[a]
                if job.epoch == b and job.state == RUN:
                    self.fail(job, t)
            elif kind == RESTARTED:
                job = jobs[a]
                if job.epoch == b and job.state == RESTART:
                    self.begin_segment(job, t)
            elif kind == REPAIRED:
                self.repaired(a, b, t)
            elif kind == UP:
                self.cluster_up(a, t)
            elif kind == DOWN:
                self.cluster_down(a, t)
            if not heap or heap[0][0] > t:
                self.schedule(t)

    def repaired(self, c: int, pod: int, t: float) -> None:
        if not self.up[c] or self.repairing[c] <= 0:
            return
        self.repairing[c] -= 1
        self.log(t, c, REPAIR, -self.gpn[c])
        self.pod_free[c][pod] += 1
        self.free[c] += 1
        self.freed = True

    # ------------------------------------------------------------------------------------------ passes

    def serve_spares(self, t: float) -> None:
        for c in range(self.C):
            q = self.spare_q[c]
            while q and self.free[c] > 0:
                job = self.jobs[q.popleft()]
                assert job.opt is not None
                self.log(t, c, LOST, -(job.opt.gpus - self.gpn[c]))
                self.take_spare(job, job.alloc[0][0] if job.alloc else 0)
                self.begin_restart(job, t)

    def route(self, job: Job) -> list[tuple[int, int]]:
        """(cluster, nodes) to try: soonest expected finish first (named jobs: run time, failures, repair stalls
        when the job leaves no spare node), else plan order. Built once per job."""
        r = job.route
        if r is None:
            cs = list(job.elig)
            if len(cs) > 1 and job.stream < 0:
                cs.sort(key=lambda c: (job.options[c].expected_days, c))
            r = job.route = [(c, self.nodes(job, c)) for c in cs]
        return r

    def nodes(self, job: Job, c: int) -> int:
        opt = job.options.get(c)
        return opt.nodes if opt is not None else -(-job.gpus // self.gpn[c])

    def wall(self, job: Job, c: int) -> float:
        w = job.west.get(c)
        if w is None:
            w = job.west[c] = self.est_wall(job, self.option(job, c))
        return w

    def shadow(self, c: int, need: int, t: float) -> tuple[float, int]:
        """EASY reservation on cluster ``c`` for ``need`` nodes: (shadow time, spare nodes at that time)."""
        free = self.free[c]
        if free >= need:
            return t, free - need
        ends = self._ends.get(c)
        if ends is None:  # expected ends of the running jobs, cached until a job starts on c in this pass
            ends = []
            for jid in self.running[c]:
                j = self.jobs[jid]
                if j.state == RUN:
                    ends.append((j.seg_end, j.held))
                else:
                    assert j.opt is not None
                    ends.append((max(j.restart_end, t) + self.est_wall(j, j.opt), j.held))
            ends.sort()
            self._ends[c] = ends
        for end, held in ends:
            free += held
            if free >= need:
                return end, free - need
        return float("inf"), 0

    def schedule(self, t: float) -> None:
        self.serve_spares(t)
        if self.queue:
            if self.freed or self.policy == "priority":
                self.full_pass(t)
            else:
                self.arrivals_pass(t)
        self.freed = False
        self.new_jobs = []
        for c in range(self.C):
            f = self.free[c] * self.gpn[c] if (self.up[c] and self.waiting_on[c] > 0) else 0
            if f != self.frag[c]:
                self.log(t, c, FRAG, f - self.frag[c])
                self.frag[c] = f

    def try_start(self, job: Job, t: float, blocked: set[int], res: dict[int, tuple[float, int]]) -> bool:
        free, up = self.free, self.up
        for c, n in self.route(job):
            if free[c] < n or not up[c] or c in blocked:
                continue
            r = res.get(c)
            late = False
            if r is not None:
                late = t + self.wall(job, c) > r[0]
                if late and n > r[1]:
                    continue
            alloc = self.place(c, n)
            if alloc is None:
                continue
            self.start(job, c, alloc, t)
            self._ends.pop(c, None)
            if r is not None and late:
                res[c] = (r[0], r[1] - n)
            return True
        return False

    def block(self, job: Job, t: float, blocked: set[int], res: dict[int, tuple[float, int]]) -> None:
        if self.policy == "backfill":
            cands = [c for c in job.elig if self.up[c] and c not in res]
            if cands:
                shadows = [(self.shadow(c, n, t), c) for c, n in self.route(job) if c in cands]
                (when, extra), best = min(shadows, key=lambda x: (x[0][0], x[1]))
                res[best] = (when, extra)
        else:  # only clusters in service count: one not yet delivered must not end the pass early
            blocked.update(c for c in job.elig if self.up[c])

    def _max_free(self, blocked: set[int]) -> int:
        return max((self.free[c] * self.gpn[c] for c in range(self.C) if c not in blocked), default=0)

    def full_pass(self, t: float) -> None:
        self._ends = {}
        blocked: set[int] = set()
        res: dict[int, tuple[float, int]] = {}
        up = sum(self.up)
        scanned = 0
        i = 0
        q = self.queue
        smallest = min(self.sizes) if self.sizes else 0
        max_free = self._max_free(blocked)
        backfill = self.policy == "backfill"
        while i < len(q):
            if len(blocked) >= up or scanned >= self.depth:
                break
            if not self.preemption and max_free < smallest:
                break  # no waiting job fits in what is free anywhere: nothing more can start in this pass
            job = self.jobs[q[i][1]]
            # a job larger than the most free GPUs on any cluster cannot start now (whole nodes only make it worse)
            if (job.gpus <= max_free and self.try_start(job, t, blocked, res)) or (
                    self.preemption and self.preempt_for(job, t, blocked)):
                del q[i]
                max_free = self._max_free(blocked)
                continue
            if not backfill or len(res) < up:
                self.block(job, t, blocked, res)
                if not backfill:
                    max_free = self._max_free(blocked)
            scanned += 1
            i += 1
        self.last_blocked, self.last_res = blocked, res

    def arrivals_pass(self, t: float) -> None:
        """Only new jobs can have changed anything (no capacity was freed since the last full pass)."""
        self._ends = {}
        blocked, res = self.last_blocked, self.last_res
        for jid in self.new_jobs:
            job = self.jobs[jid]
            if job.state != WAIT or len(blocked) >= sum(self.up):
                continue
            if self.try_start(job, t, blocked, res):
                self.queue.remove((job.key, jid))
            else:
                self.block(job, t, blocked, res)

    def preempt_for(self, job: Job, t: float, blocked: set[int]) -> bool:
        """Priority with preemption: stop lower-priority jobs (lowest first, newest first) until ``job`` fits."""
        for c, n in self.route(job):
            if c in blocked or not self.up[c]:
                continue
            victims = sorted((self.jobs[j] for j in self.running[c] if self.jobs[j].prio < job.prio),
                             key=lambda j: (j.prio, -(j.first_start or 0.0), -j.id))
            if self.free[c] + sum(v.held for v in victims) < n:
                continue
            for v in victims:
                if self.free[c] >= n:
                    alloc = self.place(c, n)
                    if alloc is not None:
                        self.start(job, c, alloc, t)
                        return True
                self.preempt(v, t)
            alloc = self.place(c, n)
            if alloc is not None:
                self.start(job, c, alloc, t)
                return True
        return False

    def waiting_jobs(self) -> list[Job]:
        return [j for j in self.jobs if j.state == WAIT and j.first_start is None]

    def running_jobs(self) -> list[Job]:
        return [j for j in self.jobs if j.state in (RUN, RESTART, SPARE)]

