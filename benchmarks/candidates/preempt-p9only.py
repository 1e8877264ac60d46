"""Lower bound on p9 p95 wait under any rule that never preempts equal priority: the same
workload with only its priority-9 jobs, one queue, backfill, no preemption."""

import json
import sys
from pathlib import Path

from reconciler.sim import matrix as m
from reconciler.sim.runs import run

jobs = int(sys.argv[1])
seeds = [int(x) for x in sys.argv[2].split(",")]
out = []
for shape in ("lublin", "synthetic", "wide"):
    for seed in seeds:
        wl = m.workload(shape, seed, jobs, Path("/work/shared/traces/lublin_256.swf"))
        p9 = [j for j in wl if j.priority == 9]
        opts = m.BASELINE.options()
        mt = run((p9, opts.policy, m.CAPACITY[shape], None, opts, None))
        w = mt.waits.get(9)
        print(shape, seed, len(p9), "p9-only p95 wait", round(w.p95), "s", flush=True)
        out.append(dict(shape=shape, seed=seed, p9=len(p9), floor_p95=w.p95))
Path(f"/tmp/preempt/floor_{jobs}_{sys.argv[2]}.json").write_text(json.dumps(out))
