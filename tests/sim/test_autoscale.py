"""The simulator's autoscaling: the node model, straight to Ray, and rayqueue's run."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.core.planner import Plan
from reconciler.sim import autoscale
from reconciler.sim.__main__ import main
from reconciler.sim.direct import straight_to_ray
from reconciler.sim.engine import simulate
from reconciler.sim.nodes import NodeModel, Nodes, parse_node_type, split
from reconciler.sim.workload import Job
from specs.cluster import Capacity, NodeType
from specs.settings.process import PlanOptions
from specs.task.models import Reason

SMALL = NodeType("small", Capacity(8, 0, 32 * 2**30), max_count=3)


def _model(*types: NodeType, delay: float = 180, idle: float = 300) -> NodeModel:
    return NodeModel(types or (SMALL,), launch_delay=delay, idle_timeout=idle)


def test_a_launch_takes_the_launch_delay() -> None:
    nodes = Nodes(_model())
    nodes.scale([Capacity(8)], 0)
    assert nodes.launches == 1
    assert nodes.scaling(0).pending == ("small",)
    assert nodes.capacity(179).cpu == 0
    assert nodes.next_due(0) == 180
    assert nodes.capacity(180).cpu == 8
    assert nodes.scaling(180).pending == ()
    # The request stands: asking again for what is already launching launches nothing more.
    nodes.scale([Capacity(8)], 60)
    assert nodes.launches == 1


def test_nothing_above_the_max_count() -> None:
    nodes = Nodes(_model())
    nodes.scale([Capacity(8)] * 10, 0)
    assert nodes.launches == 3
    nodes.scale([Capacity(8)] * 10, 200)
    assert nodes.launches == 3
    assert nodes.capacity(200).cpu == 24 == nodes.model.ceiling.cpu


def test_bundles_are_packed_onto_nodes_largest_first() -> None:
    nodes = Nodes(_model(NodeType("w", Capacity(32), 10)))
    nodes.scale([Capacity(20)] * 3, 0)  # no two 20s share a 32-CPU node
    assert nodes.launches == 3
    nodes = Nodes(_model(NodeType("w", Capacity(32), 10)))
    nodes.scale([Capacity(8), Capacity(16), Capacity(8), Capacity(16), Capacity(16)], 0)
    assert nodes.launches == 2


def test_the_smallest_type_that_holds_a_bundle_is_launched() -> None:
    big = NodeType("big", Capacity(32), 2)
    gpu = NodeType("gpu", Capacity(8, 1), 2)
    for bundle, kind in ((Capacity(4), "small"), (Capacity(20), "big"), (Capacity(2, 1), "gpu")):
        nodes = Nodes(_model(big, SMALL, gpu))
        nodes.scale([bundle], 0)
        assert [n.type.name for n in nodes.nodes] == [kind]
    # Packed onto what is launched: the 4 CPUs fit beside the GPU bundle on the GPU node.
    nodes = Nodes(_model(big, SMALL, gpu))
    nodes.scale([Capacity(4), Capacity(2, 1)], 0)
    assert [n.type.name for n in nodes.nodes] == ["gpu"]


def test_an_idle_node_goes_after_the_idle_timeout_unless_requested() -> None:
    nodes = Nodes(_model())
    nodes.scale([Capacity(8)], 0)  # up at 180
    nodes.scale([Capacity(8)], 1000)  # idle since 180 but requested: kept
    assert nodes.capacity(1000).cpu == 8
    nodes.scale([], 400)  # the request cleared; idle 220 s
    assert nodes.capacity(400).cpu == 8
    assert nodes.next_due(400) == 480
    nodes.scale([], 480)  # idle 300 s
    assert nodes.capacity(480).cpu == 0 and nodes.removals == 1


def test_a_busy_node_stays_and_its_idle_clock_starts_when_its_last_job_ends() -> None:
    nodes = Nodes(_model())
    nodes.scale([Capacity(8)], 0)
    nodes.place({"a": 6.0}, 180)
    nodes.scale([], 2000)
    assert nodes.capacity(2000).cpu == 8  # busy: never removed
    nodes.place({}, 3000)  # the job ended at 3000
    nodes.scale([], 3299)
    assert nodes.capacity(3299).cpu == 8
    nodes.scale([], 3300)
    assert nodes.capacity(3300).cpu == 0


def test_jobs_fill_the_busiest_node_first_so_others_go_idle() -> None:
    nodes = Nodes(_model())
    nodes.scale([Capacity(8)] * 2, 0)
    nodes.place({"a": 4.0, "b": 4.0}, 180)
    assert sorted(n.used for n in nodes.nodes) == [0.0, 8.0]
    nodes.place({"a": 4.0, "b": 4.0, "c": 6.0}, 200)  # c spreads over the two nodes
    assert sorted(n.used for n in nodes.nodes) == [6.0, 8.0]
    with pytest.raises(RuntimeError):
        nodes.place({"a": 4.0, "b": 4.0, "c": 6.0, "d": 4.0}, 200)


def test_min_count_nodes_are_up_from_the_start_and_stay() -> None:
    kept = NodeType("kept", Capacity(4), max_count=2, min_count=1)
    nodes = Nodes(_model(kept))
    assert nodes.capacity(0).cpu == 4
    nodes.scale([], 10_000)
    assert nodes.capacity(10_000).cpu == 4


def test_node_hours_integrate_from_launch_to_removal() -> None:
    nodes = Nodes(_model())
    nodes.scale([Capacity(8), Capacity(8)], 0)  # two nodes, up at 180
    nodes.scale([Capacity(8)], 480)  # one still requested; the other idle 300 s: removed
    assert nodes.removals == 1
    nodes.scale([], 3600)
    assert nodes.removals == 2
    assert nodes.node_seconds(end=10_000) == 480 + 3600
    # Up CPU-seconds: two 8-CPU nodes from 180, one to 480, one to 3600.
    assert nodes.up_cpu_seconds(0, 10_000) == 8 * (480 - 180) + 8 * (3600 - 180)
    # A node still alive at the end counts to the end.
    nodes.scale([Capacity(8)], 5000)
    assert nodes.node_seconds(end=6000) == 480 + 3600 + 1000


def test_a_job_wider_than_a_node_is_split_into_node_sized_bundles() -> None:
    wide = NodeType("w", Capacity(32), 4)
    assert split(Capacity(70), [wide]) == [Capacity(32), Capacity(32), Capacity(6)]
    assert split(Capacity(16), [wide]) == [Capacity(16)]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("small", "NAME:cpu"),
        ("small:cpu=8", "max >= 1"),
        ("small:cpu=8,max=2.5", "whole number"),
        ("small:cpu=8,max=2,min=3", "min"),
        ("small:cpu=eight,max=2", "number"),
        ("small:cpus=8,max=2", "unknown field"),
    ],
)
def test_a_bad_node_type_is_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_node_type(text)


def test_a_node_type_reads_its_fields() -> None:
    t = parse_node_type("gpu:cpu=8,gpu=1,memory=64,max=4,min=1")
    assert t == NodeType("gpu", Capacity(8, 1, 64 * 2**30), 4, 1)


def test_straight_to_ray_runs_every_job_once_nodes_come_and_lets_them_go() -> None:
    jobs = [
        Job("a", 0, 600, 8, 0, 3000),
        Job("b", 0, 600, 8, 0, 3000),
        Job("c", 100, 60, 4, 0, 3000),
    ]
    nodes = Nodes(_model())
    result = straight_to_ray(jobs, nodes)
    starts = {r.job.name: r.start for r in result.records}
    # a and b each need a node: both launch at 0 and are up at 180; c (4 CPUs) then finds no
    # room on the two full nodes, so its demand launches the third (up at 280).
    assert starts == {"a": 180, "b": 180, "c": 280}
    assert nodes.launches == 3 and result.unfinished == 0
    # Every node goes 300 s after its last job: c's at 340 + 300, a's and b's at 780 + 300.
    assert sorted(n.removed or 0 for n in nodes.nodes) == [640, 1080, 1080]
    assert nodes.node_seconds(end=2000) == 1080 + 1080 + (640 - 100)


def test_the_cli_compares_three_runs(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--autoscale", "--node-type", "w:cpu=16,max=4", "--workload", "synthetic"]
    assert main([*args, "--jobs", "30", "--processes", "1", "--policies", "backfill"]) == 0
    out = capsys.readouterr().out
    assert "ceiling 64 CPUs" in out
    for run in ("static (backfill)", "rayqueue autoscale (backfill)", "straight to Ray"):
        assert f"| {run} |" in out
    assert "node-hours" in out


def test_the_cli_refuses_autoscale_without_node_types(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--autoscale", "--workload", "synthetic", "--jobs", "5"]) == 2
    assert "--node-type" in capsys.readouterr().out


def test_queued_work_makes_nodes_appear_and_a_drained_queue_lets_them_go() -> None:
    """rayqueue's run: the planner's scale_request drives the node model."""
    jobs = [Job(name, 0, 600, 8, 0, 3000) for name in ("a", "b", "c")]
    nodes = Nodes(_model(NodeType("small", Capacity(8), max_count=2)))
    reasons: dict[str, list[tuple[float, str | None]]] = {}
    requests: list[tuple[float, int]] = []

    def watch(now: float, p: Plan) -> None:
        for name, status in p.statuses.items():
            reasons.setdefault(name, []).append((now, status.status.reason))
        if p.scale_request is not None:
            requests.append((now, len(p.scale_request)))

    result = simulate(jobs, "backfill", capacity_cpu=16, nodes=nodes, observer=watch)
    assert result.unfinished == 0
    starts = {r.job.name: r.start for r in result.records}
    # Two nodes (the ceiling) are asked for at once and are up after the launch delay; the
    # third job waits for a running one, not for nodes: the ceiling holds two.
    assert starts == {"a": 180, "b": 180, "c": 780}
    assert nodes.launches == 2
    assert (0, str(Reason.WAITING_FOR_SCALE_UP)) in reasons["a"]
    assert all(reason != Reason.WAITING_FOR_SCALE_UP for _, reason in reasons["c"])
    assert requests[0] == (0, 2)
    assert requests[-1][1] == 0  # drained: the request is cleared
    # One node goes 300 s after a and b end (780); c's node 300 s after c ends (1380).
    assert sorted(n.removed or 0 for n in nodes.nodes) == [1080, 1680]
    assert nodes.capacity(2000).cpu == 0
    assert nodes.node_seconds(end=2000) == 1080 + 1680


def test_a_fixed_cluster_runs_as_before() -> None:
    """Without nodes the planner is given no scaling and asks for nothing."""
    jobs = [Job(name, 0, 600, 8, 0, 3000) for name in ("a", "b", "c")]
    seen: list[object] = []
    result = simulate(
        jobs, "backfill", capacity_cpu=16, observer=lambda _, p: seen.append(p.scale_request)
    )
    assert {r.job.name: r.start for r in result.records} == {"a": 0, "b": 0, "c": 600}
    assert set(seen) == {None}


def test_the_node_types_may_come_from_the_queue_files_cluster_section(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    queues = tmp_path / "_queues.yaml"
    queues.write_text(
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  cluster:\n    nodeTypes:\n"
        "      - name: w\n        resources: {cpu: 8}\n        maxCount: 3\n"
    )
    args = ["--autoscale", "--queues", str(queues), "--workload", "synthetic", "--jobs", "20"]
    assert main([*args, "--processes", "1", "--policies", "strict"]) == 0
    out = capsys.readouterr().out
    assert "ceiling 24 CPUs (w 8 CPU x 3;" in out
    assert "| rayqueue autoscale (strict) |" in out


HEAD = NodeType("head", Capacity(4), max_count=1, min_count=1)  # a queue file lists the head


def test_a_budget_lowers_the_ceiling_rayqueue_plans_with_not_what_ray_may_launch() -> None:
    model = NodeModel((SMALL,), max_capacity=Capacity(16))
    assert model.reach.cpu == 24 and model.ceiling.cpu == 16
    assert Nodes(model).scaling(0).ceiling.cpu == 16  # what the planner is told
    assert model.static_counts() == {"small": 2}  # the static cluster holds the budget
    # Ray's autoscaler does not know the budget: asked for three nodes, it launches three.
    nodes = Nodes(model)
    nodes.scale([Capacity(8)] * 3, 0)
    assert nodes.launches == 3


def test_the_budget_comes_from_the_flag_and_from_the_queue_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = ["--autoscale", "--workload", "synthetic", "--jobs", "20", "--processes", "1"]
    run += ["--policies", "strict"]
    assert main([*run, "--node-type", "w:cpu=8,max=4", "--max-capacity", "cpu=16"]) == 0
    assert "ceiling 16 CPUs (w 8 CPU x 4; budget 16 CPU;" in capsys.readouterr().out
    queues = tmp_path / "_queues.yaml"
    queues.write_text(
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  cluster:\n"
        "    maxCapacity: {cpu: 24}\n    nodeTypes:\n"
        "      - name: w\n        resources: {cpu: 8}\n        maxCount: 4\n"
    )
    assert main([*run, "--queues", str(queues)]) == 0
    assert "ceiling 24 CPUs (w 8 CPU x 4; budget 24 CPU;" in capsys.readouterr().out
    # With both, the smaller holds.
    assert main([*run, "--queues", str(queues), "--max-capacity", "cpu=16"]) == 0
    assert "ceiling 16 CPUs" in capsys.readouterr().out


def test_max_capacity_needs_autoscale(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--workload", "synthetic", "--jobs", "5", "--max-capacity", "cpu=8"]) == 2
    assert "--max-capacity needs --autoscale" in capsys.readouterr().out


def test_node_hours_leave_out_the_nodes_the_autoscaler_never_launches_nor_removes() -> None:
    model = _model(HEAD, SMALL)
    nodes = Nodes(model)
    assert nodes.capacity(0).cpu == 4  # the head is up from the start, as a node
    nodes.scale([Capacity(8)], 0)
    assert nodes.launches == 1 and nodes.peak == 1
    assert nodes.node_seconds(end=1000) == 1000  # the small node; not the head's 1000
    assert model.max_nodes == 3
    jobs = [Job("a", 0, 600, 8, 0, 3000)]
    static = autoscale.run_one(autoscale.STATIC, jobs, model, "backfill", PlanOptions())
    assert static.node_hours == 3 * 600 / 3600  # three workers for 600 s, not four
    assert (static.launches, static.peak_nodes) == (3, 3)
