import json
import sys

files = sys.argv[1:]
nt = {}
for f in ["benchmarks/candidates/main2000_tune.json", "benchmarks/candidates/main2000_held.json"]:
    for r in json.load(open(f)):
        if r["config"] == "no teams":
            nt[(r["shape"], r["seed"])] = r["figures"]["utilization"]
rows = {}
for f in files:
    for r in json.load(open(f)):
        if r["config"] not in ("4 equal teams", "teams 1:1:1:3, decay"):
            continue
        fg = r["figures"]
        k = (r["shape"], r["config"], "held-out" if r["seed"] >= 10 else "tuning")
        gap = (fg["utilization"] - nt[(r["shape"], r["seed"])]) * 100
        miss = []
        if gap < -2:
            miss.append("g2")
        if fg["jain"] < 0.95:
            miss.append("jain")
        if fg["weighted_share"] is not None and not 0.85 <= fg["weighted_share"] <= 1.15:
            miss.append("w3")
        if fg["mean_wait_ratio"] > 1.5:
            miss.append("mean")
        if fg["p99_wait_ratio"] > 2:
            miss.append("p99")
        rows.setdefault(k, []).append((r["seed"], miss))
print(
    "| shape | configuration | seeds | goal 2 (gap ≥ -2) misses | goal 4 (w3 0.85-1.15, Jain ≥ 0.95) misses | goal 5 (mean ≤ 1.5x, p99 ≤ 2x) misses |"
)
print("|---|---|---|---|---|---|")
for k in sorted(rows):
    v = rows[k]
    n = len(v)

    def seeds(tags):
        s = [str(sd) for sd, m in v if any(t in m for t in tags)]
        return f"{len(s)}/{n}" + (f" ({','.join(s)})" if s else "")

    g4 = seeds(["w3", "jain"]) if "decay" in k[1] else "— (Jain: " + seeds(["jain"]) + ")"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {seeds(['g2'])} | {g4} | {seeds(['mean', 'p99'])} |")
