import collections
import json
import sys

d = json.load(open(sys.argv[1]))
log = d["log"]
print(d["figures"])
# for each decision: time until reserved start, lost cpu-seconds of victims (non-resumable elapsed*cpu, resumable min(elapsed,30)*cpu)
rows = []
for r in log:
    for name, prio, vs in r["dec"]:
        lost = sum(v[2] * (min(v[4], 30) if v[3] else v[4]) for v in vs)
        rows.append((r["shadow"], prio, r["fcpu"], lost, len(vs)))
tot = sum(x[3] for x in rows)
print("decisions", len(rows), "lost cpu-h", round(tot / 3600))
bins = [(None, None), (0, 60), (60, 600), (600, 3600), (3600, 1e12)]
for lo, hi in bins:
    sel = [
        x for x in rows if (x[0] is None if lo is None else (x[0] is not None and lo <= x[0] < hi))
    ]
    print(
        f"shadow {'none' if lo is None else f'{lo}-{hi}'}: {len(sel)} decisions, lost {sum(x[3] for x in sel) / max(tot, 1) * 100:.0f}% of waste"
    )
by = collections.defaultdict(float)
cnt = collections.Counter()
for x in rows:
    by[x[1]] += x[3]
    cnt[x[1]] += 1
print("by preemptor prio:", {p: (cnt[p], f"{by[p] / max(tot, 1) * 100:.0f}%") for p in sorted(by)})
ben = [x for x in rows if x[0] is not None and x[0] * x[2] < x[3]]
print(
    "benefit<lost (wait*cpu < lost):",
    len(ben),
    f"{sum(x[3] for x in ben) / max(tot, 1) * 100:.0f}% of waste",
)
byc = collections.defaultdict(float)
cc = collections.Counter()
for x in rows:
    byc[x[2]] += x[3]
    cc[x[2]] += 1
print("by preemptor cpu:", {c: (cc[c], f"{byc[c] / max(tot, 1) * 100:.0f}%") for c in sorted(byc)})
