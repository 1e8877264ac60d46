import collections
import json
import sys

d = json.load(open(sys.argv[1]))
log = d["log"]
print(d["figures"])
cls = collections.Counter()
tw = collections.Counter()
for i, r in enumerate(log):
    if "front" not in r or not r["p9q"]:
        continue
    dt = (log[i + 1]["now"] - r["now"]) if i + 1 < len(log) else 0
    if r["fp"] < 9:
        c = "front not p9"
    elif r["dec"]:
        c = "preempted"
    elif r["instop"]:
        c = "front's victims stopping"
    elif r["reason"] != "WaitingForResources":
        c = "reason " + str(r["reason"])
    elif r["free"] + r["cand_cpu"] < r["fcpu"]:
        if r["free"] + r["cand_cpu"] + r["exempt_cpu"] >= r["fcpu"]:
            c = "too few: exempt (cap/minrt) would make it fit"
        else:
            c = "too few: higher/equal prio runs block (front %d cpu)" % r["fcpu"]
    else:
        c = "other no-pick"
    cls[c] += 1
    tw[c] += dt * len(r["p9q"])
tot = sum(tw.values())
for c, v in tw.most_common():
    print(f"{v / tot * 100:5.1f}% p9-waiting-seconds  {cls[c]:6d} passes  {c}")
# decisions: victims count & preemptor prio
dec = [x for r in log for x in r["dec"]]
print(
    "decisions",
    len(dec),
    "victims",
    sum(len(x[2]) for x in dec),
    "by prio",
    collections.Counter(x[1] for x in dec),
)
print("victim prio", collections.Counter(v[1] for x in dec for v in x[2]))
print("victim resumable", collections.Counter(v[3] for x in dec for v in x[2]))
