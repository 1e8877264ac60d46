import collections
import json
import sys

print(
    "| cell (main, 2000 jobs) | p9 p95 | 128-CPU p9 front, p9 runs hold the rest | capped runs (3 preemptions) would make room | smaller p9 front, every run p9 or capped | front's victims still stopping | waste | waste from preemptors whose reserved start was > 1 h away | from 128-CPU preemptors | from priority-9 preemptors | from decisions where wait-to-reservation x CPUs < work lost |"
)
print("|---|---|---|---|---|---|---|---|---|---|---|")
for f in sys.argv[1:]:
    d = json.load(open(f))
    log = d["log"]
    fig = d["figures"]
    tw = collections.Counter()
    for i, r in enumerate(log):
        if "front" not in r or not r["p9q"]:
            continue
        dt = (log[i + 1]["now"] - r["now"]) if i + 1 < len(log) else 0
        w = dt * len(r["p9q"])
        if r["dec"]:
            c = "pre"
        elif r["instop"]:
            c = "stop"
        elif r["free"] + r["cand_cpu"] < r["fcpu"]:
            if r["free"] + r["cand_cpu"] + r["exempt_cpu"] >= r["fcpu"]:
                c = "cap"
            elif r["fcpu"] >= 128:
                c = "wide"
            else:
                c = "small"
        else:
            c = "other"
        tw[c] += w
    tot = sum(tw.values()) or 1
    rows = []
    for r in log:
        for name, prio, vs in r["dec"]:
            lost = sum(v[2] * (min(v[4], 30) if v[3] else v[4]) for v in vs)
            rows.append((r["shadow"], prio, r["fcpu"], lost))
    L = sum(x[3] for x in rows) or 1
    pc = lambda s: f"{sum(x[3] for x in rows if s(x)) / L * 100:.0f} %"
    name = f.split("diag_")[1][:-5]
    print(
        f"| {name} | {fig['urgent_p95']:.0f} s | {tw['wide'] / tot * 100:.0f} % | {tw['cap'] / tot * 100:.0f} % | {tw['small'] / tot * 100:.0f} % | {tw['stop'] / tot * 100:.0f} % | {fig['wasted'] * 100:.1f} % | {pc(lambda x: x[0] is not None and x[0] > 3600)} | {pc(lambda x: x[2] >= 128)} | {pc(lambda x: x[1] == 9)} | {pc(lambda x: x[0] is not None and x[0] * x[2] < x[3])} |"
    )
