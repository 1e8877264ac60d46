"""No teams, the same jobs labelled as each team configuration splits them: the equal-weight
teams' mean and p99 wait ratios the draw alone gives (no team rule involved)."""

import json
import sys
from pathlib import Path

from reconciler.sim import matrix as m
from reconciler.sim import teams as team_split
from reconciler.sim.engine import simulate
from reconciler.sim.matrix import CAPACITY, mark_resumable

seeds = [int(s) for s in sys.argv[1].split(",")]
jobs = int(sys.argv[2])
trace = Path("/work/shared/traces/lublin_256.swf")
base = next(c for c in m.CONFIGURATIONS if c.name == "no teams")
out = []
for shape in ("lublin", "synthetic", "wide"):
    for seed in seeds:
        for cname in ("4 equal teams", "teams 1:1:1:3, decay"):
            cfg = next(c for c in m.CONFIGURATIONS if c.name == cname)
            wl = mark_resumable(m.workload(shape, seed, jobs, trace), 0.0, seed)
            wl = team_split.split(wl, cfg.teams.count, cfg.team_load)
            res = simulate(
                wl, base.options().policy, capacity_cpu=CAPACITY[shape], options=base.options()
            )
            d = team_split.delivered(res.records, cfg.teams.count, cfg.teams.weights)
            eq = [t for k, t in enumerate(sorted(d.wait_quantiles)) if cfg.teams.weights[k] == 1.0]
            mw = [d.wait_quantiles[t]["mean"] for t in eq]
            p99 = [d.wait_quantiles[t]["p99"] for t in eq]
            r = dict(
                shape=shape,
                seed=seed,
                config=cname,
                mean_ratio=max(mw) / min(mw),
                p99_ratio=max(p99) / min(p99),
                means=mw,
            )
            out.append(r)
            print(json.dumps(r))
Path(f"/tmp/teams/noteams_ratio_{jobs}.json").write_text(json.dumps(out))
