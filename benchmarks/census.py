"""What one census of what every Ray job holds costs serve, and the dashboard, at 1,000 live
jobs: CPU seconds of the census thread, wall time, requests and bytes a poll, and the most
Python memory one census holds.

    python -m benchmarks.census                        # 1,000 jobs; 5,000 and 10,000 tasks
    python -m benchmarks.census --jobs 100 --polls 3

A stand-in dashboard on loopback answers with Ray 2.60.0's own rows (recorded from a real
head: tests/unit/shell/raycluster/answers/census_ray260.json), copied once per job: each job
holds a placement group, `--actors` actors and `--tasks` running tasks; `--nodes` nodes carry
the worker processes. Its answers are encoded before the clock starts, so what is measured is
serve's side: the reads, the JSON and the sums. At 10,000 running tasks the task list reaches
Ray's cap and is read again job by job, within the census's budget of reads.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from benchmarks.common import save, table
from reconciler.shell.raycluster.census import RayCensus

REPO = Path(__file__).resolve().parent.parent
RECORDED = REPO / "tests/unit/shell/raycluster/answers/census_ray260.json"
CADENCE_SECONDS = 15.0  # RAYQUEUE_CENSUS_SECONDS' default


def job_id(index: int) -> str:
    return (index + 2).to_bytes(4, "little").hex()


def listing(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A State API list answer of these rows, whole."""
    count = len(rows)
    body = {"total": count, "num_after_truncation": count, "num_filtered": count, "result": rows}
    return {"result": True, "msg": "", "data": {"result": body}}


class World:
    """Every answer of the stand-in dashboard, built from the recorded rows."""

    def __init__(self, jobs: int, actors: int, tasks: int, nodes: int) -> None:
        recorded = json.loads(RECORDED.read_text())
        actor = next(
            a
            for a in _rows(recorded["actors"])
            if a["class_name"] == "Holder" and not a["placement_group_id"]
        )
        task = next(t for t in _rows(recorded["tasks"]) if t["type"] == "NORMAL_TASK")
        group = _rows(recorded["placement_groups"])[0]
        worker = recorded["node"]["data"]["detail"]["workers"][0]
        self.rows: dict[str, list[dict[str, Any]]] = {"actors": [], "groups": [], "tasks": []}
        self.node_ids = [f"{n:056x}" for n in range(max(nodes, 1))]
        # Each node's worker processes; a job's processes spread over the nodes in turn.
        workers: dict[str, list[dict[str, Any]]] = {node_id: [] for node_id in self.node_ids}
        pid = 10_000

        def process() -> tuple[str, int]:
            nonlocal pid
            pid += 1
            node_id = self.node_ids[pid % len(self.node_ids)]
            workers[node_id].append(dict(worker, pid=pid))
            return node_id, pid

        for index in range(jobs):
            job = job_id(index)
            pg = dict(group, placement_group_id=f"{index:032x}{job}", creator_job_id=job)
            self.rows["groups"].append(pg)
            for n in range(actors):
                node_id, worker_pid = process()
                self.rows["actors"].append(
                    dict(actor, actor_id=f"{index:016x}{n:016x}{job}", job_id=job)
                    | {"node_id": node_id, "pid": worker_pid}
                )
            for n in range(tasks):
                node_id, worker_pid = process()
                self.rows["tasks"].append(
                    dict(task, task_id=f"{index:024x}{n:016x}{job}", job_id=job)
                    | {"node_id": node_id, "worker_pid": worker_pid}
                )
        node = recorded["node"]
        self.nodes: dict[str, bytes] = {}
        for node_id in self.node_ids:
            answer = copy.deepcopy(node)
            answer["data"]["detail"]["workers"] = workers[node_id]
            self.nodes[node_id] = json.dumps(answer).encode()
        node_rows = [dict(_rows(recorded["nodes"])[0], node_id=i) for i in self.node_ids]
        self.node_list = json.dumps(listing(node_rows)).encode()
        # What is available: the monitor's load report, one `node:` entry per node as Ray's.
        usage: dict[str, list[float]] = {"CPU": [0.0, 4.0 * len(self.node_ids)]}
        usage |= {f"node:10.0.{n // 256}.{n % 256}": [0.0, 1.0] for n in range(len(self.node_ids))}
        status = {"time": 0.0, "loadMetricsReport": {"usage": usage}}
        self.cluster_status = json.dumps({"result": True, "data": {"clusterStatus": status}})
        self.whole = {kind: json.dumps(_capped(rows)).encode() for kind, rows in self.rows.items()}

    def answer(self, target: str) -> tuple[int, bytes]:
        parts = urlsplit(target)
        path, query = parts.path, parse_qs(parts.query)
        if path.startswith("/nodes/"):
            found = self.nodes.get(path.removeprefix("/nodes/"))
            return (200, found) if found is not None else (404, b"{}")
        if path == "/api/v0/nodes":
            return 200, self.node_list
        if path == "/api/cluster_status":
            return 200, self.cluster_status.encode()
        kind = {
            "/api/v0/actors": "actors",
            "/api/v0/placement_groups": "groups",
            "/api/v0/tasks": "tasks",
        }.get(path)
        if kind is None:
            return 404, b"{}"
        wanted = dict(
            zip(query.get("filter_keys", []), query.get("filter_values", []), strict=False)
        )
        job = wanted.get("job_id") or wanted.get("creator_job_id")
        if job is None:
            return 200, self.whole[kind]
        key = "creator_job_id" if kind == "groups" else "job_id"
        return 200, json.dumps(_capped([r for r in self.rows[kind] if r[key] == job])).encode()


def _rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = answer["data"]["result"]["result"]
    return rows


def _capped(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The answer as Ray gives it: at most 10,000 rows; a task list at the cap says nothing
    of the rows left out."""
    answer = listing(rows[:10_000])
    answer["data"]["result"]["num_filtered"] = len(rows)
    return answer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    world: ClassVar[World]

    def do_GET(self) -> None:
        status, body = self.world.answer(self.path)
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def dashboard(world: World) -> Iterator[str]:
    handler = type("Handler", (_Handler,), {"world": world})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def measure(jobs: int, actors: int, tasks: int, nodes: int, polls: int) -> dict[str, Any]:
    world = World(jobs, actors, tasks, nodes)
    with dashboard(world) as address:
        reader = RayCensus(address, timeout_seconds=60)
        reader.take_census()  # connections opened, code warmed
        cpu: list[float] = []
        wall: list[float] = []
        for _ in range(polls):
            started, thread = time.perf_counter(), time.thread_time()
            taken = reader.take_census()
            cpu.append(time.thread_time() - thread)
            wall.append(time.perf_counter() - started)
        tracemalloc.start()
        reader.take_census()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        reader.close()
    cpu_per_poll = statistics.median(cpu)
    return {
        "jobs": jobs,
        "running_tasks": jobs * tasks,
        "actors": jobs * actors,
        "nodes": nodes,
        "cpu_seconds_per_poll": cpu_per_poll,
        "wall_seconds_per_poll": statistics.median(wall),
        "requests_per_poll": taken.requests,
        "bytes_per_poll": taken.bytes_read,
        "peak_python_mb": peak / 2**20,
        "core_share_at_15s": cpu_per_poll / CADENCE_SECONDS,
        "whole": taken.whole,
        "jobs_lower_bound": sum(not h.complete for h in taken.jobs.values()),
        "jobs_seen": len(taken.jobs),
        "processes_tied": sum(h.usage.processes for h in taken.jobs.values() if h.usage),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="live jobs")
    parser.add_argument("--actors", type=int, default=3, help="actors per job")
    parser.add_argument("--tasks", type=int, nargs="+", default=[5, 10], help="tasks per job")
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--polls", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows = [measure(args.jobs, args.actors, t, args.nodes, args.polls) for t in args.tasks]
    header = [
        "jobs",
        "running_tasks",
        "cpu_seconds_per_poll",
        "wall_seconds_per_poll",
        "requests_per_poll",
        "bytes_per_poll",
        "peak_python_mb",
        "core_share_at_15s",
        "jobs_lower_bound",
    ]
    print(
        table(
            "census: one poll of what every Ray job holds",
            header,
            [[r[h] for h in header] for r in rows],
        )
    )
    save("census", {"rows": rows}, args.out)


if __name__ == "__main__":
    main()
