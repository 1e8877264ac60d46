"""p9-only reference with narrow-first order among the priority-9 jobs (width -> priority)."""

import dataclasses
import math
import sys
from pathlib import Path

from reconciler.sim import matrix as m
from reconciler.sim.runs import run

jobs = int(sys.argv[1])
seeds = [int(x) for x in sys.argv[2].split(",")]
for shape in ("lublin", "synthetic", "wide"):
    for seed in seeds:
        wl = m.workload(shape, seed, jobs, Path("/work/shared/traces/lublin_256.swf"))
        p9 = [
            dataclasses.replace(j, priority=9 - min(int(math.log2(max(j.cpu, 1))), 9))
            for j in wl
            if j.priority == 9
        ]
        opts = m.BASELINE.options()
        mt = run((p9, opts.policy, m.CAPACITY[shape], None, opts, None))
        allw = [ws for ws in []]
        # p95 over all jobs of the run (every one is a priority-9 job of the cell)

        print(
            shape,
            seed,
            len(p9),
            "narrow-first p9-only: mean wait",
            round(mt.mean_wait),
            "s; per level p95",
            {k: round(v.p95) for k, v in mt.waits.items()},
            flush=True,
        )
