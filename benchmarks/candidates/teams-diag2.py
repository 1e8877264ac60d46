import sys
from pathlib import Path

from reconciler.sim import matrix as m

shape, seed, cname, jobs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
cfg = next(c for c in m.CONFIGURATIONS if c.name == cname)
r = m.run_cell(m.Cell(shape, seed, cfg, jobs, Path("/work/shared/traces/lublin_256.swf")))
md = r.metrics
d = md["delivered"]
print("util %.3f contended_s %s" % (r.figures.utilization, md.get("contended_seconds")))
print("contended", {k: round(v, 3) for k, v in d["contended_shares"].items()})
print("run", {k: round(v, 3) for k, v in d["run_shares"].items()})
print("started", {k: round(v, 3) for k, v in d["started_shares"].items()})
for t, q in d["wait_quantiles"].items():
    print(t, {k: round(v) for k, v in q.items()})
