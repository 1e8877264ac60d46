"""The walk's bound inside fair share: with team queues, each queue's backfill or
besteffort walk tests at most `backfill_candidates` of its tasks past its first that cannot
start; the rest wait NotConsidered, and each queue reports where its walk ended."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.admission.policies import POLICIES, Candidate, Claim
from reconciler.core.admission.waits import NotConsidered, OverQuota, Waiting
from reconciler.core.queues import fairshare
from reconciler.core.queues.fairshare import QueueDemand, QueueQuota
from specs.cluster import Capacity
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.models import Reason
from tests.support.planner_world import GIB, PlanWorld, task

NOW = 1_000.0
TEAMS = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 2}
      borrowingLimit: {cpu: 0}
    - name: team-b
      nominalQuota: {cpu: 2}
      borrowingLimit: {cpu: 0}
"""


def _world(policy: str, bound: int) -> PlanWorld:
    # team-a (2 CPU, no borrowing): a 1-CPU task first, then a 2-CPU one that misfits once
    # the first holds a CPU of the quota, then small ones; team-b: three small ones.
    specs = {"team-a/0": task(cpu=1, priority=9, timeoutSeconds=20)}
    specs |= {"team-a/1": task(cpu=2, priority=8)}
    specs |= {f"team-a/{i}": task(cpu=1, priority=1, timeoutSeconds=10) for i in range(2, 6)}
    specs |= {f"team-b/{i}": task(cpu=1, priority=1) for i in range(3)}
    options = PlanOptions(queue_id="q", policy=policy, backfill_candidates=bound)
    return PlanWorld(
        specs,
        capacity=Capacity(4, 0, 16 * GIB),
        options=options,
        queues=parse_queue_config(TEAMS),
    )


def test_each_queue_walk_is_bounded_past_its_first_misfit() -> None:
    # team-a: a/0 (1 CPU) starts; a/1 (2 CPU) then misfits its 2-CPU quota; with a bound of 1
    # one task past it is tested: a/2 starts, then (the walk counts the tasks still waiting)
    # a/3, which misfits the full quota; a/4 and a/5 wait NotConsidered. team-b is not bound
    # by team-a's misfit: its two first tasks start within its own quota.
    world = _world("besteffort", 1)
    plan = world.step()
    started = sorted(s.task for s in plan.submits)
    assert started == ["team-a/0", "team-a/2", "team-b/0", "team-b/1"]
    assert world.status("team-a/3").reason != Reason.NOT_CONSIDERED
    for name in ("team-a/4", "team-a/5"):
        status = world.status(name)
        assert status.reason == Reason.NOT_CONSIDERED, name
        assert "at most 1 task past the first that cannot start" in (status.message or "")
    # team-b/2 misfits (the quota is full) and is the queue's first misfit: tested, not bound.
    assert world.status("team-b/2").reason != Reason.NOT_CONSIDERED
    assert plan.summary is not None and plan.summary.not_considered == 2


def test_without_a_tight_bound_the_whole_queue_is_walked() -> None:
    world = _world("besteffort", 500)
    plan = world.step()
    assert plan.summary is not None and plan.summary.not_considered == 0
    assert world.status("team-a/5").reason != Reason.NOT_CONSIDERED


def test_backfill_within_a_queue_is_bounded_too() -> None:
    world = _world("backfill", 0)
    plan = world.step()
    # Under backfill a/1 is reserved (a/0 ends within 20 s); a/2 (10 s) would start before
    # that, but a bound of 0 tests nothing behind the reserved head.
    assert "team-a/2" not in [s.task for s in plan.submits]
    assert world.status("team-a/2").reason == Reason.NOT_CONSIDERED
    assert plan.summary is not None and plan.summary.not_considered == 4


def _cand(name: str, cpus: int, timeout: float) -> Candidate:
    return Candidate(name, Capacity(cpu=cpus), timeout)


@settings(max_examples=300, deadline=None)
@given(
    policy=st.sampled_from(["strict", "backfill", "besteffort"]),
    sizes=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([1, 1, 2, 3, 5])),
        max_size=14,
    ),
    timeouts=st.lists(st.sampled_from([0, 10, 200]), min_size=14, max_size=14),
    nominal=st.lists(st.integers(0, 4), min_size=3, max_size=3),
    free=st.integers(0, 8),
    slots=st.integers(0, 6),
    bound=st.sampled_from([None, 0, 1, 3]),
    held=st.sampled_from([None, 50.0, 500.0]),
    max_running=st.sampled_from([None, 1]),
)
def test_each_queue_tail_says_where_its_later_tasks_wait_alike(
    policy: str,
    sizes: list[tuple[str, int]],
    timeouts: list[int],
    nominal: list[int],
    free: int,
    slots: int,
    bound: int | None,
    held: float | None,
    max_running: int | None,
) -> None:
    """FairAdmission.tails holds: from its index of the queue's waiting tasks on, each waits
    for that lack; and a bound of None reports NotConsidered for nobody."""
    queue = [_cand(f"{q}/{i}", c, timeouts[i]) for i, (q, c) in enumerate(sizes)]
    claims = [Claim(Capacity(cpu=2), None if held is None else NOW + held, "a/x")]
    demands = []
    for team, quota in zip("abc", nominal, strict=True):
        members = [c for c in queue if c.name.startswith(team + "/")]
        q = QueueQuota(team, Capacity(cpu=quota), max_running=max_running)
        own = [c for c in claims if c.task.startswith(team + "/")]
        demands.append(QueueDemand(q, Capacity(), members, POLICIES[policy], own))
    capacity = Capacity(cpu=12)
    result = fairshare.admit(
        capacity,
        Capacity(cpu=free),
        demands,
        claims,
        NOW,
        slots,
        fairshare.RESERVATION_OF_POLICY[policy],
        order={c.name: i for i, c in enumerate(queue)},
        bound=bound,
    )
    started = set(result.start)
    for demand in demands:
        name = demand.quota.name
        waiting = [c.name for c in demand.candidates if c.name not in started]
        # Never-fitting tasks (OverQuota) are out of the walk: the tail indexes the rest.
        waiting = [n for n in waiting if not isinstance(result.waiting[n].lacks, OverQuota)]
        tail = result.tails.get(name)
        if tail is None:
            continue
        index, lack = tail
        for later in waiting[index:]:
            assert result.waiting[later].lacks == lack, (later, result.waiting[later])
    reasons = {w.lacks.__class__ for w in result.waiting.values()}
    if bound is None or policy == "strict":
        assert NotConsidered not in reasons
    else:
        for n, w in result.waiting.items():
            if isinstance(w.lacks, NotConsidered):
                assert w == Waiting(NotConsidered(bound), w.ahead, w.queue), n


def test_backfill_within_a_queue_without_the_bound_overtakes() -> None:
    world = _world("backfill", 500)
    plan = world.step()
    assert "team-a/2" in [s.task for s in plan.submits]  # the bound above is what held it
