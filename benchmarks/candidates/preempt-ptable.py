"""usage: ptable.py BASE.json... -- CAND.json...  (preemption figures per shape x config x seedset)"""

import json
import sys
from collections import defaultdict

args = sys.argv[1:]
i = args.index("--")
base = {}
for f in args[:i]:
    for r in json.load(open(f)):
        base[(r["shape"], r["seed"], r["config"])] = r
rows = defaultdict(list)
for f in args[i + 1 :]:
    for r in json.load(open(f)):
        if r["config"] == "no teams":
            continue
        rows[(r["shape"], r["config"], "held-out" if r["seed"] >= 10 else "tuning")].append(r)


def dur(s):
    if s is None or s != s:
        return "—"
    return f"{s:.0f} s" if s < 120 else (f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h")


print(
    "| shape | configuration | seeds | util | vs no teams (pts, ≥ -3) | Δ util vs base (pts) | p9 p95 wait (≤ 60 s) | base p9 p95 | wasted (≤ 5 %) | base wasted | max preempt (≤ 3) | preemptions | mean wait vs base |"
)
print("|" + "---|" * 13)
for (shape, cfg, ss), rs in sorted(rows.items()):
    rs.sort(key=lambda r: r["seed"])
    cells = []
    for r in rs:
        f = r["figures"]
        nb = base.get((shape, r["seed"], "no teams"))
        b = base.get((shape, r["seed"], cfg))
        cells.append(
            dict(
                u=f["utilization"] * 100,
                gap=(f["utilization"] - nb["figures"]["utilization"]) * 100 if nb else None,
                d=(f["utilization"] - b["figures"]["utilization"]) * 100 if b else None,
                p95=f["urgent_p95"],
                bp95=b["figures"]["urgent_p95"] if b else None,
                w=f["wasted"] * 100,
                bw=b["figures"]["wasted"] * 100 if b else None,
                mx=f["max_preemptions"],
                n=r.get("preemptions"),
                mw=(r["mean_wait"] / b["mean_wait"] - 1) * 100
                if b and "mean_wait" in b and "mean_wait" in r
                else None,
            )
        )
    j = lambda k, fmt: " / ".join("—" if c[k] is None else fmt(c[k]) for c in cells)
    print(
        f"| {shape} | {cfg} | {ss} {','.join(str(r['seed']) for r in rs)} | {j('u', lambda v: f'{v:.1f}')} | {j('gap', lambda v: f'{v:+.1f}')} | {j('d', lambda v: f'{v:+.1f}')} | {j('p95', dur)} | {j('bp95', dur)} | {j('w', lambda v: f'{v:.1f}')} | {j('bw', lambda v: f'{v:.1f}')} | {j('mx', str)} | {j('n', str)} | {j('mw', lambda v: f'{v:+.0f} %')} |"
    )
