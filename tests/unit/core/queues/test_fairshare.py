"""Admission across queues: quotas, borrowing and lending limits, fair order, reasons."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.admission.policies import POLICIES, Candidate
from reconciler.core.queues import fairshare, quotas
from reconciler.core.queues.fairshare import NO_LIMIT, QueueDemand, QueueQuota, admit, resolve
from specs.cluster import Capacity
from specs.queues.parse import parse_queue_config

CLUSTER = Capacity(16, 4, 64 * 2**30)
INF = math.inf


def cpu(n: float) -> Capacity:
    return Capacity(n, 0, 0)


def task(name: str, request: Capacity, timeout: float = 0) -> Candidate:
    return Candidate(name, request, timeout)


@dataclass
class Q:
    name: str
    nominal: Capacity
    tasks: list[Candidate] = field(default_factory=list)
    usage: Capacity = field(default_factory=Capacity)
    borrow: Capacity = NO_LIMIT
    lend: Capacity = NO_LIMIT
    weight: float = 1.0
    policy: str = "strict"

    def demand(self) -> QueueDemand:
        quota = QueueQuota(self.name, self.nominal, self.borrow, self.lend, self.weight)
        return QueueDemand(quota, self.usage, self.tasks, POLICIES[self.policy])


def run(queues: list[Q], capacity: Capacity = CLUSTER, slots: int = 100) -> fairshare.FairAdmission:
    used = Capacity()
    for q in queues:
        used = used + q.usage
    return admit(capacity, capacity - used, [q.demand() for q in queues], [], 0.0, slots)


def tasks(prefix: str, n: int, size: float) -> list[Candidate]:
    return [task(f"{prefix}/{i}", cpu(size)) for i in range(n)]


# name, queues, expected starts (in admission order; None: only the set is checked)
CASES = [
    (
        "nominal quota guaranteed while another queue floods",
        [Q("a", cpu(8), tasks("a", 20, 1)), Q("b", cpu(8), tasks("b", 3, 4))],
        None,
        {"a": 8, "b": 2},  # b's 8 is its own, whatever a's flood
    ),
    (
        "idle quota is lent",
        [Q("a", cpu(8), tasks("a", 20, 1)), Q("b", cpu(8), tasks("b", 1, 4))],
        None,
        {"a": 12, "b": 1},
    ),
    (
        "borrowing limit caps use above nominal",
        [Q("a", cpu(8), tasks("a", 20, 1), borrow=cpu(2)), Q("b", cpu(8))],
        None,
        {"a": 10, "b": 0},
    ),
    (
        "lending limit caps what an idle queue gives away",
        [Q("a", cpu(8), tasks("a", 20, 1)), Q("b", cpu(8), lend=cpu(3))],
        None,
        {"a": 11, "b": 0},
    ),
    (
        "no lending from a queue whose guaranteed head waits",
        [
            Q("a", cpu(8), tasks("a", 20, 1), usage=cpu(12)),
            Q("b", cpu(8), [task("b/big", cpu(6))], usage=cpu(2)),
        ],
        None,
        {"a": 0, "b": 0},  # 2 free; b's head is within b's nominal, so a must not take them
    ),
    (
        # The simulator's team returning after idling: its head is wider than its
        # whole nominal, so it cannot be guaranteed and its unused quota stays lendable; a
        # smaller task behind it that fits its nominal still goes before any borrower.
        "a head wider than its nominal does not stop lending",
        [
            Q(
                "a",
                cpu(8),
                [task("a/wide", cpu(12)), task("a/small", cpu(2))],
                usage=cpu(1),
                policy="besteffort",
            ),
            Q("b", cpu(8), tasks("b", 20, 1), policy="besteffort"),
        ],
        None,
        {"a": 1, "b": 13},  # b: its 8, then a's 7 unused less a/small's 2
    ),
    (
        "a strict head blocks only its own queue",
        [
            Q("a", cpu(8), [task("a/huge", cpu(12)), task("a/small", cpu(1))], usage=cpu(8)),
            Q("b", cpu(8), tasks("b", 3, 1)),
        ],
        None,
        {"a": 0, "b": 3},
    ),
    (
        "a head blocked on GPUs does not block a queue needing only CPUs",
        [
            Q("a", Capacity(8, 4, 0), [task("a/gpu", Capacity(1, 4, 0))], usage=Capacity(1, 2, 0)),
            Q("b", Capacity(8, 0, 0), tasks("b", 6, 1)),
        ],
        None,
        {"a": 0, "b": 6},
    ),
]


@pytest.mark.parametrize(
    ("queues", "expected"),
    [(c[1], c[3]) for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_admission_counts(queues: list[Q], expected: dict[str, int]) -> None:
    result = run(queues)
    counts = {q.name: sum(1 for t in result.start if t.startswith(q.name + "/")) for q in queues}
    assert counts == expected


def test_fair_order_is_recomputed_after_every_admission() -> None:
    # Both queues borrow (nominal 0 each, default holds the cluster and is idle): picks must
    # alternate, not hand one queue all its tasks first (kueue #9345).
    queues = [
        Q("a", cpu(0), tasks("a", 4, 2)),
        Q("b", cpu(0), tasks("b", 4, 2)),
        Q("default", cpu(16)),
    ]
    result = run(queues)
    assert result.start == ["a/0", "b/0", "a/1", "b/1", "a/2", "b/2", "a/3", "b/3"]


def test_weights_divide_borrowed_capacity() -> None:
    queues = [
        Q("a", cpu(0), tasks("a", 16, 1), weight=1),
        Q("b", cpu(0), tasks("b", 16, 1), weight=3),
        Q("default", cpu(16)),
    ]
    result = run(queues)
    assert sum(t.startswith("a/") for t in result.start) == 4
    assert sum(t.startswith("b/") for t in result.start) == 12


LEND = Capacity(16, 4, 0)  # what the queues can lend between them


# usage, nominal, weight, expected weighted share
SHARES = [
    ("under nominal: 0", cpu(3), cpu(4), 1.0, 0.0),
    ("at nominal: 0", cpu(4), cpu(4), 1.0, 0.0),
    ("under nominal, weight 0: 0, not NaN", cpu(3), cpu(4), 0.0, 0.0),
    ("only what is above nominal counts", cpu(6), cpu(4), 1.0, 2 / 16),
    ("a big nominal is not counted", cpu(14), cpu(12), 1.0, 2 / 16),
    ("divided by the weight", cpu(6), cpu(4), 2.0, 1 / 16),
    ("weight 0 borrows last", cpu(6), cpu(4), 0.0, INF),
    ("the dominant resource", Capacity(6, 2, 0), Capacity(4, 1, 0), 1.0, 1 / 4),
    (
        "a resource under nominal does not offset one above",
        Capacity(6, 0, 0),
        cpu(4) + Capacity(0, 4, 0),
        1.0,
        2 / 16,
    ),
    ("a resource nobody lends does not count", Capacity(4, 0, 2**30), cpu(4), 1.0, 0.0),
]


@pytest.mark.parametrize(("case", "usage", "nominal", "weight", "expected"), SHARES)
def test_dominant_share(
    case: str, usage: Capacity, nominal: Capacity, weight: float, expected: float
) -> None:
    share = quotas.dominant_share(usage, nominal, LEND, weight)
    assert share.weighted == pytest.approx(expected), case
    assert not math.isnan(share.weighted)


def test_shares_order_weight_zero_borrowers_last_and_among_themselves_by_ratio() -> None:
    lend = cpu(16)
    big = quotas.dominant_share(cpu(16), cpu(0), lend, 1.0)  # borrows everything: 1.0
    small_zero = quotas.dominant_share(cpu(1), cpu(0), lend, 0.0)
    large_zero = quotas.dominant_share(cpu(2), cpu(0), lend, 0.0)
    assert big < small_zero < large_zero
    # borrowing only what nobody lends: still borrowing, so a weight-0 queue is last
    assert quotas.dominant_share(Capacity(0, 1, 0), cpu(0), lend, 0.0).weighted == INF


def test_lendable_is_nominal_capped_by_lending_limit() -> None:
    queues = [
        QueueQuota("a", Capacity(8, 2, 0), lending_limit=Capacity(3, INF, INF)),
        QueueQuota("b", Capacity(4, 0, 0)),
    ]
    assert quotas.lendable(queues) == Capacity(7, 2, 0)


def test_weight_zero_borrows_only_what_nobody_else_wants() -> None:
    queues = [
        Q("a", cpu(0), tasks("a", 8, 1), weight=0),
        Q("b", cpu(0), tasks("b", 4, 1), weight=1),
        Q("default", cpu(6)),
    ]
    result = run(queues, capacity=cpu(6))
    assert result.start == ["b/0", "b/1", "b/2", "b/3", "a/0", "a/1"]
    assert result.queues["a"].share == INF and result.queues["b"].share == pytest.approx(4 / 6)


def test_a_bigger_nominal_quota_is_not_counted_against_a_borrower() -> None:
    # a and b both use their whole nominal quota; default's 8 idle CPU are the only loan.
    queues = [
        Q("a", cpu(2), tasks("a", 12, 1), usage=cpu(2)),
        Q("b", cpu(6), tasks("b", 12, 1), usage=cpu(6)),
        Q("default", cpu(8)),
    ]
    result = run(queues)
    assert sum(t.startswith("a/") for t in result.start) == 4
    assert sum(t.startswith("b/") for t in result.start) == 4


def test_lowest_share_first_when_only_one_fits() -> None:
    queues = [
        Q("a", cpu(0), [task("a/0", cpu(2))], usage=cpu(4)),
        Q("b", cpu(0), [task("b/0", cpu(2))], usage=cpu(2)),
        Q("default", cpu(16)),
    ]
    result = admit(CLUSTER, cpu(2), [q.demand() for q in queues], [], 0.0, 10)
    assert result.start == ["b/0"]
    assert result.waiting["a/0"].reason == "WaitingForResources"


def test_nominal_picks_go_before_borrowers() -> None:
    queues = [
        Q("a", cpu(8), tasks("a", 4, 2), usage=cpu(8)),  # borrowing, lowest share 0.5
        Q("b", cpu(8), [task("b/0", cpu(2))], usage=cpu(6)),  # within nominal, share 0.375
    ]
    result = admit(CLUSTER, cpu(2), [q.demand() for q in queues], [], 0.0, 10)
    assert result.start == ["b/0"]


def test_quota_exceeded_message() -> None:
    queues = [
        Q("team-a", cpu(8), tasks("team-a", 5, 8), usage=cpu(8), borrow=cpu(0)),
        Q("team-b", cpu(8)),
    ]
    result = run(queues)
    assert result.start == []
    waiting = result.waiting["team-a/0"]
    assert waiting.reason == "QuotaExceeded"
    assert waiting.message == (
        "team-a uses 8/8 CPU of its quota; can borrow 0 more (borrowingLimit 0); first in team-a"
    )
    assert result.waiting["team-a/1"].reason == "WaitingBehindHigherPriority"
    assert result.waiting["team-a/1"].message.endswith("1 task ahead in team-a")
    # besteffort: everyone waits on the quota, each told its place
    queues[0].policy = "besteffort"
    result = run(queues)
    assert result.waiting["team-a/3"].message == (
        "team-a uses 8/8 CPU of its quota; can borrow 0 more (borrowingLimit 0); "
        "3 tasks ahead in team-a"
    )


def test_waiting_for_resources_when_the_cluster_is_full() -> None:
    queues = [Q("a", cpu(8), [task("a/0", cpu(2))]), Q("b", cpu(8), usage=cpu(16))]
    result = run(queues)
    assert result.waiting["a/0"].reason == "WaitingForResources"
    assert result.waiting["a/0"].message == "needs 2 CPU; 0 free; first in a"


def test_task_beyond_nominal_plus_borrowing_limit_does_not_block_its_queue() -> None:
    queues = [
        Q("a", cpu(4), [task("a/big", cpu(6)), task("a/small", cpu(1))], borrow=cpu(1)),
        Q("b", cpu(12)),
    ]
    result = run(queues)
    assert result.start == ["a/small"]
    assert result.waiting["a/big"].reason == "QuotaExceeded"
    assert "at most 5" in result.waiting["a/big"].message


def test_resolve_gives_default_the_rest_and_reports_oversubscription() -> None:
    config = parse_queue_config(
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n"
        "    - {name: a, nominalQuota: {cpu: 10}}\n    - {name: b, nominalQuota: {cpu: 4}}\n"
    )
    quotas = resolve(config, cpu(16))
    assert [q.nominal.cpu for q in quotas.queues] == [10, 4, 2]
    assert quotas.oversubscribed is None
    shrunk = resolve(config, cpu(12))
    assert shrunk.queues[-1].nominal.cpu == 0
    assert shrunk.oversubscribed is not None and "14 CPU > 12" in shrunk.oversubscribed


def test_report_borrowed_and_lent() -> None:
    result = run([Q("a", cpu(8), tasks("a", 12, 1)), Q("b", cpu(8), tasks("b", 1, 1))])
    a, b = result.queues["a"], result.queues["b"]
    assert a.usage.cpu == 12 and a.borrowed.cpu == 4
    assert b.usage.cpu == 1 and b.lent.cpu == 4 and b.borrowed.cpu == 0
    # the share counts only what a borrows (4 CPU) against what a and b can lend (16 CPU)
    assert a.share == pytest.approx(4 / 16) and b.share == 0


# --- the invariant, for any mix of queues --------------------------------------------------

amounts = st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, 8.0])
limits = st.one_of(st.just(INF), amounts)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Capacity, list[Q]]:
    capacity = Capacity(draw(st.sampled_from([4.0, 8.0, 16.0])), draw(amounts), 0)
    queues = []
    for index in range(draw(st.integers(1, 4))):
        name = f"q{index}"
        nominal = Capacity(draw(amounts), draw(amounts), 0)
        usage = Capacity(draw(amounts), draw(st.sampled_from([0.0, 1.0])), 0)
        queue_tasks = [
            task(f"{name}/{i}", Capacity(draw(amounts), draw(st.sampled_from([0.0, 1.0])), 0))
            for i in range(draw(st.integers(0, 6)))
        ]
        queues.append(
            Q(
                name,
                nominal,
                queue_tasks,
                usage=usage,
                borrow=Capacity(draw(limits), draw(limits), INF),
                lend=Capacity(draw(limits), draw(limits), INF),
                weight=draw(st.sampled_from([0.5, 1.0, 3.0])),
                policy=draw(st.sampled_from(sorted(POLICIES))),
            )
        )
    return capacity, queues


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_no_pass_admits_beyond_quotas_lenders_or_cluster(
    scenario: tuple[Capacity, list[Q]],
) -> None:
    capacity, queues = scenario
    used = Capacity()
    for q in queues:
        used = used + q.usage
    free = capacity - used
    result = admit(capacity, free, [q.demand() for q in queues], [], 0.0, 100)

    request = {t.name: t.request for q in queues for t in q.tasks}
    queue_of = {t.name: q for q in queues for t in q.tasks}
    usage = {q.name: q.usage for q in queues}
    physical = free
    for name in result.start:  # replay the pass one admission at a time
        q = queue_of[name]
        before = usage[q.name]
        after = before + request[name]
        usage[q.name] = after
        physical = physical - request[name]
        for r in ("cpu", "gpu"):
            need = getattr(request[name], r)
            if need == 0:
                continue
            # never beyond what the cluster has free
            assert getattr(physical, r) >= -1e-9
            nominal = getattr(q.nominal, r)
            if getattr(after, r) <= nominal + 1e-9:
                continue  # within nominal: only the cluster bounds it
            # never beyond nominal + borrowingLimit
            assert getattr(after, r) <= nominal + getattr(q.borrow, r) + 1e-9
            # borrowed in total never beyond what lenders offer within their lendingLimits
            borrowed = sum(
                max(0.0, getattr(usage[p.name], r) - getattr(p.nominal, r)) for p in queues
            )
            lendable = sum(
                min(getattr(p.lend, r), max(0.0, getattr(p.nominal, r) - getattr(usage[p.name], r)))
                for p in queues
                if p is not q
            )
            assert borrowed <= lendable + 1e-9
    # and every task is either started or told why it waits
    assert set(result.start) | set(result.waiting) == set(request)
    assert not set(result.start) & set(result.waiting)


@pytest.mark.parametrize(
    ("reservation", "b_starts"),
    [(fairshare.STRICT_RESERVATION, False), (fairshare.NO_RESERVATION, True)],
)
def test_a_borrower_may_not_take_what_the_least_served_head_waits_for(
    reservation: str, b_starts: bool
) -> None:
    queues = [
        Q("a", cpu(4), [task("a/wide", cpu(8))]),  # share 0; needs 8, 6 free
        Q("b", cpu(4), [task("b/more", cpu(1))], usage=cpu(10)),  # borrowing 6 already
        Q("default", cpu(8)),
    ]
    result = admit(CLUSTER, cpu(6), [q.demand() for q in queues], [], 0.0, 10, reservation)
    assert ("b/more" in result.start) is b_starts
    assert "a/wide" not in result.start
    if not b_starts:
        held = result.waiting["b/more"]
        assert held.reason == "WaitingBehindReservation"
        assert "kept for a/wide" in held.message


# a's later task: name, CPUs, timeout; whether it starts, and until when that answer holds
OWN_LATER = [
    ("a/short", 3, 50, True, 50.0),  # ends by t=50, before a/wide's start at t=100
    ("a/beside", 2, 1000, True, math.inf),  # fits beside a/wide at t=100 (10 free, 8 needed)
    ("a/long", 3, 1000, False, math.inf),  # would still hold 1 CPU of a/wide's at t=100
    ("a/forever", 3, 0, False, math.inf),  # no timeout; 3 fit beside a/wide never
]


@pytest.mark.parametrize(("name", "size", "timeout", "starts", "until"), OWN_LATER)
@pytest.mark.parametrize("least_served", [True, False])
def test_the_least_served_queue_backfills_its_own_tasks_past_its_blocked_head(
    least_served: bool, name: str, size: float, timeout: float, starts: bool, until: float
) -> None:
    # Pure sharing (the default queue lends the cluster). b runs 10 CPUs: 4 end by t=100, then
    # a/wide (8) fits with 2 to spare; 6 never end. a's own backfill, which reserves within
    # its quota view, lets none of its later tasks past a/wide. The least-served queue judges
    # them against the room held for a/wide across queues instead (EASY backfill): one that
    # ends before t=100 or fits beside a/wide then starts; one that would push a/wide back
    # does not.
    running = [fairshare.Claim(cpu(4), 100.0), fairshare.Claim(cpu(6), None)]
    b_task = task("b/more", cpu(3)) if least_served else task("b/wide", cpu(8))
    queues = [
        Q("a", cpu(0), [task("a/wide", cpu(8)), task(name, cpu(size), timeout)], policy="backfill"),
        Q("b", cpu(0), [b_task], usage=cpu(10), policy="backfill"),
        Q("default", cpu(16)),
    ]
    demands = [q.demand() for q in queues]
    if not least_served:  # a has used the whole cluster in the past: b is the least served
        a = demands[0]
        demands[0] = QueueDemand(a.quota, a.usage, a.candidates, a.policy, past=cpu(16))
    result = admit(CLUSTER, cpu(6), demands, running, 0.0, 10, fairshare.BACKFILL_RESERVATION)
    assert "a/wide" not in result.start
    if least_served:
        assert result.start == ([name] if starts else [])
        assert result.until == until
        # b, ahead in share and without a timeout, may not take what a/wide waits for
        assert result.waiting["b/more"].reason == "WaitingBehindReservation"
    else:
        # a is ahead: its head's own reservation within the queue stands
        assert result.start == []
    if not result.start:
        assert name in result.waiting


@pytest.mark.parametrize(("extra", "b_starts"), [(0, False), (1, True)])
def test_backfill_hold_lets_a_borrower_past_only_beside_the_head(
    extra: int, b_starts: bool
) -> None:
    # of b's 10 CPUs, 2 are free again by t=100 (then a/wide fits, with `extra` to spare); 8
    # never. b/short would end (by its timeout) before t=100: that does not let it past the
    # room held for a/wide (timeouts are late, and a's head would be pushed back); it passes
    # only if it fits beside a/wide at its reserved start.
    running = [fairshare.Claim(cpu(2), 100.0), fairshare.Claim(cpu(8), None)]
    queues = [
        Q("a", cpu(4), [task("a/wide", cpu(8 - extra))], policy="backfill"),
        Q(
            "b",
            cpu(4),
            [task("b/short", cpu(1), 50), task("b/long", cpu(2), 500)],
            usage=cpu(10),
            policy="backfill",
        ),
        Q("default", cpu(8)),
    ]
    demands = [q.demand() for q in queues]
    result = admit(CLUSTER, cpu(6), demands, running, 0.0, 10, fairshare.BACKFILL_RESERVATION)
    assert result.start == (["b/short"] if b_starts else [])
    if not b_starts:
        assert result.waiting["b/short"].reason == "WaitingBehindReservation"
        assert "kept for a/wide" in result.waiting["b/short"].message


@pytest.mark.parametrize("b_borrows", [True, False])
def test_a_borrowing_preemptor_whose_victims_are_gone_goes_after_picks_within_nominal(
    b_borrows: bool,
) -> None:
    # 3 CPUs free: room for a/x (2, within a's nominal) or b/pre (3, its victims gone), not
    # both. The room its victims left is b/pre's, unless b/pre would borrow it while a/x is
    # within its quota: nominal quota is never held back, and a/x's queue would reclaim it
    # (tests/unit/core/test_planner_guarantees.py, over arbitrary passes, found the pass that did).
    queues = [
        Q("a", cpu(8), [task("a/x", cpu(2))], usage=cpu(2)),
        Q("b", cpu(4) if b_borrows else cpu(8), [task("b/pre", cpu(3))], usage=cpu(4)),
        Q("default", cpu(4) if b_borrows else cpu(0)),
    ]
    demands = [q.demand() for q in queues]
    free = cpu(3)
    first = frozenset({"b/pre"})
    result = admit(CLUSTER, free, demands, [], 0.0, 10, first=first)
    assert result.start == (["a/x"] if b_borrows else ["b/pre"])
