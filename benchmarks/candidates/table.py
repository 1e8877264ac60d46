import json
import sys
from collections import defaultdict

# usage: table.py BASEFILES... -- CANDFILES...
args = sys.argv[1:]
i = args.index("--")
base = {}
for f in args[:i]:
    for r in json.load(open(f)):
        base[(r["shape"], r["seed"], r["config"])] = r
rows = defaultdict(list)
for f in args[i + 1 :]:
    for r in json.load(open(f)):
        rows[(r["shape"], r["config"], "held-out" if r["seed"] >= 10 else "tuning")].append(r)


def rng(v, fmt):
    v = [x for x in v if x is not None]
    return "—" if not v else f"{fmt.format(min(v))} to {fmt.format(max(v))}"


print(
    "| shape | configuration | seeds | util | gap vs no teams (pts) | Δ vs current (pts) | Jain | w3 share | mean wait max/min | p99 max/min | worst team mean-wait change vs current |"
)
print("|" + "---|" * 11)
for (shape, cfg, ss), rs in sorted(rows.items()):
    gaps, d, wch = [], [], []
    for r in rs:
        nb = base.get((shape, r["seed"], "no teams"))
        cur = base.get((shape, r["seed"], cfg))
        u = r["figures"]["utilization"]
        if nb and cfg != "no teams":
            gaps.append((u - nb["figures"]["utilization"]) * 100)
        if cur:
            d.append((u - cur["figures"]["utilization"]) * 100)
            for t, w in r["waits"].items():
                w0 = cur["waits"].get(t)
                if w0:
                    wch.append((w / w0 - 1) * 100)
    f = lambda k: [r["figures"][k] for r in rs]
    print(
        f"| {shape} | {cfg} | {ss} {','.join(str(r['seed']) for r in rs)} | {rng([x * 100 for x in f('utilization')], '{:.1f}')} | {rng(gaps, '{:+.1f}')} | {rng(d, '{:+.1f}')} | {rng(f('jain'), '{:.3f}')} | {rng(f('weighted_share'), '{:.2f}')} | {rng(f('mean_wait_ratio'), '{:.2f}')} | {rng(f('p99_wait_ratio'), '{:.2f}')} | {('max %+.0f %%' % max(wch)) if wch else '—'} |"
    )
