"""One cell: per team, mean wait by width class (<= nominal, > nominal, whole cluster)."""

import sys
from collections import defaultdict
from pathlib import Path

from reconciler.sim import matrix as m
from reconciler.sim import teams as team_split
from reconciler.sim.engine import MEMORY_BYTES, simulate
from reconciler.sim.matrix import *
from reconciler.sim.matrix import CAPACITY

shape, seed, cname, jobs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
cfg = next(c for c in m.CONFIGURATIONS if c.name == cname)
trace = Path("/work/shared/traces/lublin_256.swf")
cap = CAPACITY[shape]
wl = m.workload(shape, seed, jobs, trace)
wl = mark_resumable(wl, cfg.resumable_fraction, seed)
import os

t = cfg.teams
wl = team_split.split(wl, t.count, cfg.team_load)
if os.environ.get("NOTEAMS"):
    cfg0 = next(c for c in m.CONFIGURATIONS if c.name == "no teams")
    res = simulate(wl, cfg0.options().policy, capacity_cpu=cap, options=cfg0.options())
opts = cfg.options()
conf = team_split.team_config(
    t.count, t.weights, cap, MEMORY_BYTES, quota=t.quota, half_life=t.half_life
)
if not os.environ.get("NOTEAMS"):
    res = simulate(wl, opts.policy, capacity_cpu=cap, queues=conf, options=opts)
nom = cap / t.count
st = defaultdict(list)
for r in res.records:
    team = team_split.team_of(r.job.name)
    w = r.job.cpu if hasattr(r.job, "cpu") else r.job.request.cpu
    cls = "whole" if w >= cap else (">nom" if w > nom else "<=nom")
    st[(team, cls)].append(r.wait if r.wait is not None else float("nan"))
    st[(team, "all")].append(r.wait if r.wait is not None else float("nan"))
ends = max(r.end or 0 for r in res.records)
busy = sum(
    ((r.end or 0) - (r.last_start or r.start or 0))
    * (r.job.cpu if hasattr(r.job, "cpu") else r.job.request.cpu)
    for r in res.records
    if r.start is not None
)
print(f"cap {cap} nominal {nom} makespan {ends:.0f} util~{busy / (cap * ends):.3f}")
for k in sorted(st):
    v = st[k]
    import math

    ok = [x for x in v if not math.isnan(x)]
    print(
        f"{k[0]:8} {k[1]:6} n={len(v):4} never={len(v) - len(ok):3} mean={sum(ok) / max(1, len(ok)):9.0f} max={max(ok, default=0):9.0f}"
    )
# narrow jobs' wait spent while an earlier-arrived wide (>nom) job of the same team was still waiting
print("team: narrow wait-seconds total, of which behind an own waiting wide job earlier in line")
for team in sorted({team_split.team_of(r.job.name) for r in res.records}):
    recs = [
        r for r in res.records if team_split.team_of(r.job.name) == team and r.start is not None
    ]
    wides = [(r.job.arrival, r.start) for r in recs if r.job.cpu > nom]
    tot = beh = 0.0
    for r in recs:
        if r.job.cpu > nom:
            continue
        a, s = r.job.arrival, r.start
        tot += s - a
        # union of [max(a, wa), min(s, ws)] for wides with wa <= a
        iv = sorted((max(a, wa), min(s, ws)) for wa, ws in wides if wa <= a and ws > a)
        cur_s = cur_e = None
        cov = 0.0
        for x, y in iv:
            if y <= x:
                continue
            if cur_e is None or x > cur_e:
                if cur_e is not None:
                    cov += cur_e - cur_s
                cur_s, cur_e = x, y
            else:
                cur_e = max(cur_e, y)
        if cur_e is not None:
            cov += cur_e - cur_s
        beh += cov
    print(f"{team}: {tot:12.0f} {beh:12.0f} ({beh / max(tot, 1):.0%})")
