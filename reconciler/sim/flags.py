"""The flags of python -m reconciler.sim: the argument parser and its value checks."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from reconciler.core.admission.policies import POLICIES
from reconciler.core.preemption.victims import MODES, NEVER
from reconciler.sim.engine import CENSUS_SECONDS
from reconciler.sim.nodes import IDLE_TIMEOUT, LAUNCH_DELAY, parse_node_type
from reconciler.sim.workload import PRIORITIES, TIMEOUT_FACTOR, Misuse
from specs.cluster import Capacity, NodeType
from specs.queues.config import DEFAULT_HALF_LIFE, parse_capacity, parse_duration
from specs.settings.process import PlanOptions

DESCRIPTION = (
    "python -m reconciler.sim: run workloads through the real planner and print the results table."
)

URGENT_TIER_TEXT = "13,13,13,13,13,13,12,5,3,2"
"""An urgent tier: priorities 7, 8 and 9 are 5, 3 and 2 % of the jobs, the rest share 90 %."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m reconciler.sim", description=DESCRIPTION)
    p.add_argument(
        "--workload",
        choices=["lublin", "synthetic", "wide", "all"],
        default=None,
        help="default: all (lublin and synthetic) with --trace, synthetic without; wide: "
        "power-of-two widths up to the cluster, mostly short jobs, --load default 0.95",
    )
    # No default path: the trace is data outside the repository, so the caller names it.
    p.add_argument("--trace", type=Path, default=None, metavar="PATH", help="SWF trace for lublin")
    p.add_argument("--jobs", type=int, default=2000, help="trace prefix / synthetic job count")
    p.add_argument("--seed", type=int, default=1, help="seeds timeouts, priorities, synthetic")
    p.add_argument(
        "--load",
        type=float,
        default=None,
        help="offered load of the synthetic workload (default 0.9) or the wide one (0.95)",
    )
    p.add_argument("--capacity", type=int, default=256, help="CPUs of the simulated cluster")
    p.add_argument(
        "--arrival-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="multiply every arrival time by F (0.35 offers a trace ~2.9 times its load)",
    )
    p.add_argument(
        "--timeout-factor",
        type=_factor,
        default=TIMEOUT_FACTOR,
        metavar="LOW,HIGH",
        help="declared timeoutSeconds = run x U[LOW, HIGH] (default 1,5)",
    )
    p.add_argument(
        "--priority-weights",
        type=_priority_weights,
        default=None,
        metavar="W0,...,W9",
        help="relative share of each priority 0..9 (default uniform); e.g. an urgent tier: "
        f"{URGENT_TIER_TEXT}",
    )
    p.add_argument(
        "--policies",
        default=",".join(POLICIES),
        help=f"comma-separated, from {', '.join(POLICIES)} (default all)",
    )
    p.add_argument(
        "--teams",
        type=int,
        default=0,
        help="split the workload over N team folders (job i to team i mod N), one queue each",
    )
    p.add_argument(
        "--weights",
        type=_weights,
        default=None,
        metavar="W1,W2,...",
        help="fair-sharing weight per team (default all 1)",
    )
    p.add_argument(
        "--team-load",
        type=_weights,
        default=None,
        metavar="L1,L2,...",
        help="each team's part of the offered CPU-hours: each job to the team furthest behind "
        "its part (default: job i to team i mod N). The weights make every team offer the same "
        "multiple of its weight's share",
    )
    p.add_argument(
        "--tree",
        type=_tree,
        default=None,
        metavar="TxU",
        help="nested queues: T teams of U users each (e.g. 4x2), each user a sub-queue of its "
        "team (team-k/user-j); job i to team i mod T, user (i div T) mod U. Replaces --teams",
    )
    p.add_argument(
        "--user-weights",
        type=_weights,
        default=None,
        metavar="W1,W2,...",
        help="with --tree: fair-sharing weight of each user within its team (default all 1)",
    )
    p.add_argument(
        "--team-quota",
        choices=["equal", "none"],
        default="equal",
        help="nominal quota per team: an equal split of the cluster (default), or none, so "
        "that every start borrows and the weights alone divide the cluster",
    )
    p.add_argument(
        "--usage-half-life",
        type=_half_life,
        default=DEFAULT_HALF_LIFE,
        metavar="DURATION",
        help="with --teams: past use counts half after this long (168h, 7d, seconds), or off "
        "(only current use counts; fairSharing.mode CurrentUsage); default 168h",
    )
    p.add_argument(
        "--fair-preemption",
        action="store_true",
        help="with --teams: a team below another's weighted share may stop its runs "
        "(fairSharing.preemptionStrategies: [LessThanOrEqualToFinalShare]; pure sharing only, "
        "--team-quota none; with --tree, judged where the two branches meet)",
    )
    p.add_argument(
        "--idle-team-until",
        type=float,
        default=None,
        metavar="SECONDS",
        help="team-0 sends no work before this time: its quota is lent, then must come back",
    )
    p.add_argument(
        "--queues",
        type=Path,
        default=None,
        metavar="FILE",
        help="a queue file in the format of _queues.yaml, preemption: blocks included; job i "
        "goes to its i-th listed queue (mod their number). Replaces --teams and the "
        "preemption flags, as it does for serve",
    )
    # The preemption flags of one queue; None: not given (refused beside --queues).
    p.add_argument(
        "--preemption",
        choices=MODES,
        default=None,
        help=f"the queue's withinQueue preemption (default {NEVER})",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a preempted job holds its CPUs this long before it stops (default 30)",
    )
    p.add_argument(
        "--min-runtime",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a run younger than this is never preempted (default 0)",
    )
    p.add_argument(
        "--max-preemptions",
        type=int,
        default=None,
        metavar="N",
        help="a job preempted N times is spared from then on (default 3; 0: no limit)",
    )
    p.add_argument(
        "--min-preemptor-priority",
        type=_priority,
        default=None,
        metavar="N",
        help="only a job of priority N or more may preempt (default 0: any higher priority)",
    )
    p.add_argument(
        "--resumable-fraction",
        type=_fraction,
        default=0.0,
        metavar="F",
        help="each job is resumable with probability F (seeded by --seed): preempted, it "
        "loses only its grace period (default 0)",
    )
    p.add_argument(
        "--overuse",
        type=_overuse,
        default=None,
        metavar="F:K",
        help="each job, with probability F (seeded by --seed), really holds K times the CPUs "
        "it declares (at most the cluster) while the planner sees its declaration; a job "
        "whose real use does not fit waits inside Ray (e.g. 0.3:3)",
    )
    p.add_argument(
        "--charge-held",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the planner charges each job what Ray says it holds, from a census taken every "
        "--census-seconds, as serve does (default); --no-charge-held: declarations only",
    )
    p.add_argument(
        "--census-seconds",
        type=float,
        default=CENSUS_SECONDS,
        metavar="S",
        help=f"between two censuses of what each job holds (default {CENSUS_SECONDS:g}, serve's)",
    )
    p.add_argument(
        "--compare-charging",
        action="store_true",
        help="run each policy also with --no-charge-held, its rows named POLICY/declared",
    )
    p.add_argument(
        "--underuse",
        type=_underuse,
        default=None,
        metavar="F:K",
        help="each job, with probability F (of those --overuse did not draw), really holds "
        "K times the CPUs it declares, K at most 1 (e.g. 0.2:0.5)",
    )
    p.add_argument(
        "--array-fraction",
        type=_fraction,
        default=0.0,
        metavar="F",
        help="each job becomes a task array with probability F (seeded by --seed): "
        "--array-size copies of it, elements NAME[i] (default 0)",
    )
    p.add_argument(
        "--array-size", type=whole_number, default=10, metavar="N", help="elements per array (10)"
    )
    p.add_argument(
        "--array-max-parallel",
        type=whole_number,
        default=None,
        metavar="M",
        help="each array's maxParallel (default: its size, no cap)",
    )
    p.add_argument(
        "--autoscale",
        action="store_true",
        help="compare a static cluster at the ceiling, rayqueue on an autoscaling cluster and "
        "the jobs straight to Ray on it (needs --node-type; the ceiling replaces --capacity)",
    )
    p.add_argument(
        "--node-type",
        type=_node_type,
        action="append",
        default=[],
        metavar="NAME:cpu=N,max=M",
        help="a worker node type (repeatable); also min=K, gpu=G, memory=GIB. Default with "
        "--autoscale: the --queues file's cluster: nodeTypes",
    )
    p.add_argument(
        "--max-capacity",
        type=_capacity,
        default=None,
        metavar="cpu=N,gpu=N,memory=Q",
        help="--autoscale: a budget that lowers the ceiling rayqueue plans with, as serve's "
        "flag (a resource left out is 0); with the --queues file's cluster: maxCapacity, the "
        "smaller holds. Ray's autoscaler does not know it",
    )
    p.add_argument(
        "--head-cpu",
        type=float,
        default=0.0,
        metavar="N",
        help="CPUs the static head offers to jobs (default 0: the head runs none)",
    )
    p.add_argument(
        "--launch-delay",
        type=float,
        default=LAUNCH_DELAY,
        metavar="SECONDS",
        help=f"a launched node is up this much later (default {LAUNCH_DELAY:g})",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=IDLE_TIMEOUT,
        metavar="SECONDS",
        help=f"a node idle this long, and not requested, is removed (default {IDLE_TIMEOUT:g})",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the metrics here")
    p.add_argument(
        "--processes",
        type=int,
        default=min(os.cpu_count() or 1, 4),
        help="runs in parallel (results do not depend on it)",
    )
    return p


def _factor(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    bounds = (float(low), float(high or low))
    if not 1 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError("need 1 <= LOW <= HIGH: a job must end within its bound")
    return bounds


def _capacity(text: str) -> Capacity:
    try:
        return parse_capacity(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _node_type(text: str) -> NodeType:
    try:
        return parse_node_type(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a fraction 0..1 (got {text!r})")
    return value


def _misuse(text: str, low: float, high: float) -> Misuse:
    fraction, sep, factor = text.partition(":")
    try:
        value = Misuse(float(fraction), float(factor))
    except ValueError:
        value = Misuse(-1.0, -1.0)
    if not sep or not 0 <= value.fraction <= 1 or not low <= value.factor <= high:
        raise argparse.ArgumentTypeError(
            f"F:K, a fraction F 0..1 and a factor K {low:g}..{high:g} (got {text!r})"
        )
    return value


def _overuse(text: str) -> Misuse:
    return _misuse(text, 1.0, math.inf)


def _underuse(text: str) -> Misuse:
    # A job holds something while it runs: a factor of 0 would be a job that holds nothing.
    return _misuse(text, 1e-3, 1.0)


# The flag, its dest, and the value it has when not given: the settings' default.
_DEFAULTS = PlanOptions()
PREEMPTION_FLAGS: tuple[tuple[str, str, object], ...] = (
    ("--preemption", "preemption", _DEFAULTS.preemption),
    ("--grace", "grace", _DEFAULTS.preemption_grace_seconds),
    ("--min-runtime", "min_runtime", _DEFAULTS.preemption_min_runtime_seconds),
    ("--max-preemptions", "max_preemptions", _DEFAULTS.preemption_max_per_task),
    (
        "--min-preemptor-priority",
        "min_preemptor_priority",
        _DEFAULTS.preemption_min_preemptor_priority,
    ),
)


def whole_number(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1 (got {text!r})")
    return value


def _priority(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < PRIORITIES:
        raise argparse.ArgumentTypeError(f"a priority 0..{PRIORITIES - 1} (got {text!r})")
    return value


def _priority_weights(text: str) -> tuple[float, ...]:
    try:
        weights = tuple(float(w) for w in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("ten numbers, e.g. " + URGENT_TIER_TEXT) from None
    if len(weights) != PRIORITIES or any(w < 0 for w in weights) or not any(weights):
        raise argparse.ArgumentTypeError("ten shares >= 0 for priorities 0..9, not all 0")
    return weights


def _half_life(text: str) -> float | None:
    if text.strip().lower() == "off":
        return None
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError("the half-life must be > 0 (or off)")
    return seconds


def _tree(text: str) -> tuple[int, int]:
    teams, sep, users = text.lower().partition("x")
    try:
        shape = (int(teams), int(users))
    except ValueError:
        raise argparse.ArgumentTypeError("a tree is TEAMSxUSERS, e.g. 4x2") from None
    if not sep or not (1 <= shape[0] <= 1000 and 1 <= shape[1] <= 1000):
        raise argparse.ArgumentTypeError("a tree is TEAMSxUSERS, each 1..1000, e.g. 4x2")
    return shape


def _weights(text: str) -> list[float]:
    try:
        weights = [float(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("weights are numbers, e.g. 1,1,3") from None
    if not weights or any(w <= 0 for w in weights):
        raise argparse.ArgumentTypeError("weights must be > 0")
    return weights
