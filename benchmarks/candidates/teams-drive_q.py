"""Run chosen matrix cells; print per-cell util, gap, jain, wait ratios."""

import argparse
import json
import time
from pathlib import Path

from reconciler.sim import matrix as m
from reconciler.sim.goals import *  # noqa

p = argparse.ArgumentParser()
p.add_argument("--seeds", default="0,1,2")
p.add_argument("--shapes", default="lublin,synthetic,wide")
p.add_argument("--configs", default="no teams;4 equal teams")
p.add_argument("--jobs", type=int, default=1000)
p.add_argument("--workers", type=int, default=1)
p.add_argument("--out", required=True)
a = p.parse_args()
names = a.configs.split(";")
confs = [
    __import__("dataclasses").replace(
        c, teams=__import__("dataclasses").replace(c.teams, quota=False)
    )
    if c.teams
    else c
    for c in m.CONFIGURATIONS
    if c.name in names
]
trace = Path("/work/shared/traces/lublin_256.swf")
todo = [
    m.Cell(s, int(sd), c, a.jobs, trace)
    for s in a.shapes.split(",")
    for c in confs
    for sd in a.seeds.split(",")
]
t = time.time()
res = m.run_cells(todo, a.workers)
out = [
    dict(
        shape=r.shape,
        seed=r.seed,
        config=r.configuration,
        figures=__import__("dataclasses").asdict(r.figures),
        waits={
            t: q.get("mean")
            for t, q in ((r.metrics.get("delivered") or {}).get("wait_quantiles") or {}).items()
        },
    )
    for r in res
]
Path(a.out).write_text(json.dumps(out, default=str, indent=1))
print("secs", time.time() - t)
