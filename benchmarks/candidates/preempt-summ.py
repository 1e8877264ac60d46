"""one line per variant: goals met over the preemption cells, mean/min util change, mean waste, median p95"""

import json
import statistics as st
import sys

base = {(r["shape"], r["seed"], r["config"]): r for r in json.load(open(sys.argv[1]))}
print(
    "| variant | cells | p95 ≤ 60 s | wasted ≤ 5 % | util ≥ no-teams − 3 | all four | Δ util vs base mean (min) | wasted mean | p9 p95 median | mean wait vs base, worst |"
)
print("|---|---|---|---|---|---|---|---|---|---|")
for f in sys.argv[2:]:
    rs = [r for r in json.load(open(f)) if r["config"].startswith("preempt")]
    n = len(rs)
    ok = [0, 0, 0, 0]
    d = []
    w = []
    p = []
    mw = []
    for r in rs:
        fg = r["figures"]
        nb = base[(r["shape"], r["seed"], "no teams")]["figures"]
        b = base[(r["shape"], r["seed"], r["config"])]
        a = fg["urgent_p95"] <= 60
        bb = fg["wasted"] <= 0.05
        c = fg["utilization"] >= nb["utilization"] - 0.03
        ok[0] += a
        ok[1] += bb
        ok[2] += c
        ok[3] += a and bb and c and fg["max_preemptions"] <= 3
        d.append((fg["utilization"] - b["figures"]["utilization"]) * 100)
        w.append(fg["wasted"] * 100)
        p.append(fg["urgent_p95"])
        if "mean_wait" in b:
            mw.append((r["mean_wait"] / b["mean_wait"] - 1) * 100)
    worst = ("%+.0f %%" % max(mw)) if mw else "—"
    print(
        f"| {f.split('/')[-1][:-5]} | {n} | {ok[0]} | {ok[1]} | {ok[2]} | {ok[3]} | {st.mean(d):+.1f} ({min(d):+.1f}) | {st.mean(w):.1f} % | {st.median(p):.0f} s | {worst} |"
    )
