"""Run chosen matrix cells; save figures + mean wait + urgent stats."""

import argparse
import dataclasses
import json
import time
from pathlib import Path

from reconciler.sim import matrix as m

p = argparse.ArgumentParser()
p.add_argument("--seeds", default="0,1,2")
p.add_argument("--shapes", default="lublin,synthetic,wide")
p.add_argument("--configs", default="no teams;preempt ≥ 7, half resumable;preempt any lower, cap 3")
p.add_argument("--jobs", type=int, default=1000)
p.add_argument("--workers", type=int, default=1)
p.add_argument("--out", required=True)
a = p.parse_args()
names = a.configs.split(";")
confs = [c for c in m.CONFIGURATIONS if c.name in names]
trace = Path("/work/shared/traces/lublin_256.swf")
todo = [
    m.Cell(s, int(sd), c, a.jobs, trace)
    for s in a.shapes.split(",")
    for c in confs
    for sd in a.seeds.split(",")
]
t = time.time()
res = m.run_cells(todo, a.workers)
out = []
for r in res:
    mt = r.metrics
    out.append(
        dict(
            shape=r.shape,
            seed=r.seed,
            config=r.configuration,
            figures=dataclasses.asdict(r.figures),
            waits={
                t: q.get("mean")
                for t, q in ((mt.get("delivered") or {}).get("wait_quantiles") or {}).items()
            },
            mean_wait=mt["mean_wait"],
            preemptions=mt["preemptions"],
            waits_by_prio=mt["waits"],
            urgent=mt["urgent"],
        )
    )
Path(a.out).write_text(json.dumps(out, default=str, indent=1))
print("secs", time.time() - t)
