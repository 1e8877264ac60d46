import json


def load(*fs):
    d = {}
    for f in fs:
        for r in json.load(open(f)):
            d[(r["shape"], r["seed"], r["config"])] = r["figures"]
    return d


main = load("/tmp/preempt/base2000.json", "benchmarks/candidates/main2000_held.json")
cand = load("/tmp/preempt/W1_2000.json", "/tmp/preempt/W1_2000_held.json")
ref = {}
for f in ("/tmp/preempt/floor_2000_0,1,2.json", "/tmp/preempt/floor_2000_10,11,12,13,14.json"):
    for r in json.load(open(f)):
        ref[(r["shape"], r["seed"])] = r["floor_p95"]
print(
    "| shape | configuration | seeds | p9 p95 > 60 s: main | W1 | wasted > 5 %: main | W1 | util < no teams − 3: main | W1 | p9-only reference > 60 s |"
)
print("|---|---|---|---|---|---|---|---|---|---|")
for shape in ("lublin", "synthetic", "wide"):
    for cfg in ("preempt ≥ 7, half resumable", "preempt any lower, cap 3"):
        for name, seeds in (("tuning", (0, 1, 2)), ("held-out", (10, 11, 12, 13, 14))):

            def miss(d, test):
                out = [
                    str(s) for s in seeds if test(d[(shape, s, cfg)], main[(shape, s, "no teams")])
                ]
                return ", ".join(out) if out else "none"

            p = lambda f, nb: f["urgent_p95"] > 60
            w = lambda f, nb: f["wasted"] > 0.05
            u = lambda f, nb: f["utilization"] < nb["utilization"] - 0.03
            r = ", ".join(str(s) for s in seeds if ref[(shape, s)] > 60) or "none"
            print(
                f"| {shape} | {cfg} | {name} | {miss(main, p)} | {miss(cand, p)} | {miss(main, w)} | {miss(cand, w)} | {miss(main, u)} | {miss(cand, u)} | {r} |"
            )
