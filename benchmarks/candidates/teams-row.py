import json
import sys

b = {
    (r["shape"], r["seed"]): r["figures"]["utilization"]
    for f in sys.argv[2:]
    for r in json.load(open(f))
    if r["config"] == "no teams"
}
for r in json.load(open(sys.argv[1])):
    if r["config"] == "no teams":
        continue
    f = r["figures"]
    print(
        r["shape"],
        r["seed"],
        r["config"][:12],
        "util %.1f gap %+.1f jain %.3f w3 %s mwr %.2f p99r %.2f"
        % (
            f["utilization"] * 100,
            (f["utilization"] - b[(r["shape"], r["seed"])]) * 100,
            f["jain"],
            "%.2f" % f["weighted_share"] if f["weighted_share"] else "-",
            f["mean_wait_ratio"],
            f["p99_wait_ratio"],
        ),
        " ".join("%.0f" % v for v in r["waits"].values()),
    )
