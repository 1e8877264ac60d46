"""The census of what each Ray job holds (raycluster/census.py), read from answers a Ray
2.60.0 head gave (answers/census_ray260.json): what is counted and what is not, lists cut at
their limit and read again job by job, a job left a lower bound, and a dashboard that cannot
say."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from reconciler.shell.raycluster import census
from reconciler.shell.raycluster.census import RayCensus, fold, read_rows, usage_by_job
from specs.cluster import Available, Capacity, Census, CensusUnsupported, Holdings, RayUnavailable
from tests.support.localhttp import QuietHandler, serving
from tests.support.net import free_port

ANSWERS = json.loads((Path(__file__).parent / "answers" / "census_ray260.json").read_text())
JOB = "02000000"  # the captured job's Ray job id (its driver started two actors, a group, tasks)
SUBMISSION = "obs-cap-1"
NODE = ANSWERS["nodes"]["data"]["result"]["result"][0]["node_id"]
DRIVER = (ANSWERS["jobs"][0]["driver_node_id"], int(ANSWERS["jobs"][0]["driver_info"]["pid"]))

Route = Callable[[str], tuple[int, Any]]


# GET /api/cluster_status, as a Ray 2.60 head answers it, cut to what the census reads: its
# monitor's load report, each resource as [used, total], and the report's time.
CLUSTER_STATUS = {
    "result": True,
    "msg": "Got cluster status.",
    "data": {
        "clusterStatus": {
            "time": 1796687308.75,
            "loadMetricsReport": {
                "usage": {
                    "CPU": [3.25, 4.0],
                    "memory": [0.0, 8589934592.0],
                    "objectStoreMemory": [0.0, 7324470067.0],
                    "node:InternalHead": [0.0, 1.0],
                }
            },
        }
    },
}


def recorded(path: str) -> tuple[int, Any]:
    """The head's own answers, each list whole."""
    if path.startswith("/api/cluster_status"):
        return 200, CLUSTER_STATUS
    for prefix, key in (
        ("/api/v0/placement_groups", "placement_groups"),
        ("/api/v0/actors", "actors"),
        ("/api/v0/tasks", "tasks"),
        ("/api/v0/nodes", "nodes"),
        ("/nodes/", "node"),
    ):
        if path.startswith(prefix):
            return 200, ANSWERS[key]
    return 404, {"msg": "no such route"}


class _Dashboard(QuietHandler):
    protocol_version = "HTTP/1.1"
    route: ClassVar[Route] = staticmethod(recorded)
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Dashboard.seen.append(self.path)
        status, payload = _Dashboard.route(self.path)
        self.answer(status, json.dumps(payload).encode())


@pytest.fixture
def dashboard() -> Iterator[ThreadingHTTPServer]:
    _Dashboard.seen = []
    _Dashboard.route = staticmethod(recorded)
    with serving(_Dashboard) as server:
        yield server


def reader(server: ThreadingHTTPServer, **options: Any) -> RayCensus:
    return RayCensus(f"http://127.0.0.1:{server.server_port}", timeout_seconds=5, **options)


def answers_with(**changes: Any) -> Route:
    """The recorded answers, some paths answered otherwise: `changes` maps a name to a route
    of its own, tried first (tasks_global, tasks_of_job, nodes_detail)."""

    def route(path: str) -> tuple[int, Any]:
        if path.startswith("/api/v0/tasks"):
            own = "filter_keys=job_id" in path
            key = "tasks_of_job" if own else "tasks_global"
            if key in changes:
                return changes[key](path)  # type: ignore[no-any-return]
        if path.startswith("/nodes/") and "nodes_detail" in changes:
            return changes["nodes_detail"](path)  # type: ignore[no-any-return]
        return recorded(path)

    return route


def cut_tasks(path: str) -> tuple[int, Any]:
    return 200, ANSWERS["tasks_limit1"]


def test_a_job_holds_its_groups_its_actors_outside_them_and_its_running_tasks() -> None:
    groups = fold(census.GROUPS, read_rows(ANSWERS["placement_groups"], what="groups").rows)
    actors = fold(census.ACTORS, read_rows(ANSWERS["actors"], what="actors").rows)
    tasks = fold(census.TASKS, read_rows(ANSWERS["tasks"], what="tasks").rows)
    # Two bundles of 0.5 and 0.25 CPU; the 0.25-CPU actor inside the group is not counted again.
    assert groups.by_job == {JOB: Capacity(0.75)}
    # Two 1-CPU actors; the job's supervisor (entrypoint_num_cpus=0.5) runs under the
    # dashboard's job and is recorded by submission id, apart.
    assert actors.by_job == {JOB: Capacity(2.0)}
    assert actors.entrypoints == {SUBMISSION: Capacity(0.5)}
    # Two 0.25-CPU tasks; the actor's running method (an ACTOR_TASK) is the actor's.
    assert tasks.by_job == {JOB: Capacity(0.5)}


def test_a_list_is_cut_when_ray_matched_more_rows_than_it_gave() -> None:
    assert not read_rows(ANSWERS["tasks"], what="tasks", capped=True).cut
    assert read_rows(ANSWERS["tasks_limit1"], what="tasks", capped=True).cut
    dropped = json.loads(json.dumps(ANSWERS["tasks"]))
    dropped["data"]["result"]["total"] += 5  # task events Ray dropped: rows may be missing
    assert read_rows(dropped, what="tasks", capped=True).cut
    full = json.loads(json.dumps(ANSWERS["tasks"]))
    body = full["data"]["result"]
    # The data source gave its cap of rows, the API server filtered them down to these: a
    # task list may have lost rows at the source unsaid; actors and groups say so in `total`.
    body["total"] = body["num_after_truncation"] = census.STATE_LIMIT
    assert read_rows(full, what="tasks", capped=True).cut
    assert not read_rows(full, what="actors").cut


def test_the_census_of_the_recorded_head(dashboard: ThreadingHTTPServer) -> None:
    taken = reader(dashboard).take_census()
    held = taken.of(JOB)
    assert (held.groups, held.actors, held.tasks) == (Capacity(0.75), Capacity(2), Capacity(0.5))
    assert held.logical == Capacity(3.25)
    assert held.complete and taken.whole and taken.complete
    assert taken.entrypoints == {SUBMISSION: Capacity(0.5)}
    # Physical use: the node's worker processes carry no job id in Ray 2.60's answer
    # ("ffff"); each is tied to its job by the pid the actor and task rows name.
    assert taken.physical and held.usage is not None
    assert held.usage.processes == 5  # three actors' workers, two tasks' workers
    assert held.usage.memory > 0 and held.usage.cpu_percent > 0
    # What Ray's monitor last reported available: 4 CPUs less the 3.25 in use.
    assert taken.available == Available(Capacity(0.75, 0, 8589934592.0), 1796687308.75)
    # Three lists, the node list, one node and the cluster's status: six requests, and the
    # bytes they carried.
    assert taken.requests == 6 == len(_Dashboard.seen)
    assert taken.bytes_read > 10_000
    # A job Ray lists nothing for holds nothing, exactly, when every list came whole.
    assert taken.of("09000000") == Holdings("09000000")


def test_a_cut_list_is_read_again_job_by_job(dashboard: ThreadingHTTPServer) -> None:
    _Dashboard.route = staticmethod(answers_with(tasks_global=cut_tasks))
    taken = reader(dashboard).take_census()
    held = taken.of(JOB)
    assert held.tasks == Capacity(0.5) and held.complete
    own = [path for path in _Dashboard.seen if f"filter_values={JOB}" in path]
    assert len(own) == 1 and own[0].startswith("/api/v0/tasks")
    # A job the cut list left out entirely would be unknown: the census is not whole.
    assert not taken.whole
    assert not taken.of("09000000").complete


def test_a_job_whose_own_list_is_cut_is_a_lower_bound(dashboard: ThreadingHTTPServer) -> None:
    _Dashboard.route = staticmethod(answers_with(tasks_global=cut_tasks, tasks_of_job=cut_tasks))
    held = reader(dashboard).take_census().of(JOB)
    assert not held.complete
    assert held.tasks == Capacity(0.25)  # what came: one of its two tasks
    assert held.actors == Capacity(2)  # its other lists came whole


def test_jobs_past_the_reads_of_one_census_stay_a_lower_bound(
    dashboard: ThreadingHTTPServer,
) -> None:
    _Dashboard.route = staticmethod(answers_with(tasks_global=cut_tasks))
    taken = reader(dashboard, job_reads=0).take_census()
    assert not taken.of(JOB).complete
    assert not any("filter_values=" + JOB in path for path in _Dashboard.seen)


def test_a_dashboard_without_the_state_api_says_so(dashboard: ThreadingHTTPServer) -> None:
    _Dashboard.route = staticmethod(lambda path: (404, {"msg": "Not Found"}))
    with pytest.raises(CensusUnsupported):
        reader(dashboard).take_census()


def test_without_node_data_the_census_is_logical_only(dashboard: ThreadingHTTPServer) -> None:
    _Dashboard.route = staticmethod(answers_with(nodes_detail=lambda path: (404, {})))
    taken = reader(dashboard).take_census()
    assert not taken.physical
    assert taken.of(JOB).usage is None
    assert taken.of(JOB).logical == Capacity(3.25)


def test_physical_use_is_not_read_when_switched_off(dashboard: ThreadingHTTPServer) -> None:
    taken = reader(dashboard, physical=False).take_census()
    assert not taken.physical and taken.requests == 4


def test_a_dashboard_without_the_clusters_status_leaves_available_unsaid(
    dashboard: ThreadingHTTPServer,
) -> None:
    _Dashboard.route = staticmethod(
        lambda path: (404, {}) if path.startswith("/api/cluster_status") else recorded(path)
    )
    taken = reader(dashboard).take_census()
    assert taken.available is None and taken.of(JOB).logical == Capacity(3.25)


def test_a_dashboard_that_does_not_answer_is_unavailable() -> None:
    with pytest.raises(RayUnavailable):
        RayCensus(f"http://127.0.0.1:{free_port()}", timeout_seconds=2).take_census()


def test_worker_processes_of_no_job_are_not_counted() -> None:
    node = json.loads(json.dumps(ANSWERS["node"]))
    found = usage_by_job(node, NODE, {})
    assert found == {}  # no job id, no pid known: nobody's
    node["data"]["detail"]["workers"][0]["jobId"] = "05000000"
    node["data"]["detail"]["workers"][0]["gpuMemoryUsage"] = 3  # MB
    found = usage_by_job(node, NODE, {})
    assert found is not None and found["05000000"].gpu_memory == 3 * 2**20
    assert usage_by_job({"result": True, "data": {"detail": {}}}, NODE, {}) is None


def test_a_pid_is_tied_to_a_job_on_its_own_node_only() -> None:
    on_node = usage_by_job(ANSWERS["node"], NODE, {(NODE, 3232): JOB})
    assert on_node is not None and on_node[JOB].processes == 1
    assert usage_by_job(ANSWERS["node"], NODE, {("another-node", 3232): JOB}) == {}


def test_the_driver_process_counts_for_its_job(dashboard: ThreadingHTTPServer) -> None:
    """Ray's job listing names each driver's node and pid (the State API does not)."""
    without = reader(dashboard).take_census().of(JOB).usage
    with_driver = reader(dashboard).take_census({DRIVER: JOB}).of(JOB).usage
    assert without is not None and with_driver is not None
    assert with_driver.processes == without.processes + 1


def test_a_census_is_a_value_no_one_changes() -> None:
    source = {JOB: Holdings(JOB, actors=Capacity(1))}
    taken = Census(1.0, source)
    source[JOB] = Holdings(JOB)
    assert taken.of(JOB).actors == Capacity(1)
    with pytest.raises(TypeError):
        taken.jobs[JOB] = Holdings(JOB)  # type: ignore[index]


def test_a_census_runs_beside_other_reads(dashboard: ThreadingHTTPServer) -> None:
    """Its own connections: censuses on two threads at once both come whole."""
    read = reader(dashboard)
    results: list[Census] = []
    threads = [threading.Thread(target=lambda: results.append(read.take_census())) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert [r.of(JOB).logical for r in results] == [Capacity(3.25)] * 2


def test_an_answer_keeps_only_what_the_census_reads_of_each_row() -> None:
    """A task row of Ray 2.60 carries its events, profiling data and runtime env: dropped as
    the answer is decoded, so a list of 10,000 is not held whole."""
    for key in ("tasks", "actors", "placement_groups"):
        rows = census.decode(json.dumps(ANSWERS[key]).encode())["data"]["result"]["result"]
        assert rows and all(len(row) <= 7 for row in rows)
        whole = read_rows(ANSWERS[key], what=key).rows
        kind = {"tasks": census.TASKS, "actors": census.ACTORS}.get(key, census.GROUPS)
        assert fold(kind, rows) == fold(kind, whole)
    node = census.decode(json.dumps(ANSWERS["node"]).encode())
    pids = {(NODE, 3232): JOB}
    assert usage_by_job(node, NODE, pids) == usage_by_job(ANSWERS["node"], NODE, pids)
    assert "cmdline" not in node["data"]["detail"]["workers"][0]


def _cluster_status(usage: dict[str, list[float]]) -> dict[str, Any]:
    return {"data": {"clusterStatus": {"time": 100.0, "loadMetricsReport": {"usage": usage}}}}


def test_a_report_without_the_nodes_resources_yet_is_no_report() -> None:
    # A fresh head's first reports carry an empty usage: read as "nothing free", every
    # start would wait for the next census.
    assert census.available_of(_cluster_status({})) is None
    assert census.available_of(_cluster_status({"node:InternalHead": [0.0, 1.0]})) is None
    found = census.available_of(
        _cluster_status({"CPU": [1.0, 4.0], "memory": [0.0, 8.0], "objectStoreMemory": [0, 2]})
    )
    assert found is not None and found.reported_at == 100.0
    assert (found.resources.cpu, found.resources.gpu, found.resources.memory) == (3.0, 0.0, 8.0)
