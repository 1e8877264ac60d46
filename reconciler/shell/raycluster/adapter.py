"""The real RayAdapter: Ray's job REST API through the SDK, with timeouts and typed errors.

The reads the loop repeats every pass (the job listing, its live jobs one by one, the node
listing for capacity) skip the SDK and go over kept-alive connections (poll.py): same
endpoints, no new connection and no pydantic model per read. Their errors map exactly as the
SDK calls' do.

With autoscaler.py (the GCS requests) and address.py (the GCS look-up of the dashboard), one
of the few modules that import `ray` (pyproject.toml, `ray-behind-adapter`).

How the SDK (Ray 2.60) reports failures, and what we make of them:
- Every non-200 answer goes through `SubmissionClient._raise_error`, which raises a bare
  RuntimeError with the status code inside the message. We override that one method to raise
  `_HTTPStatusError` carrying the status code and body, so nothing below parses messages
  to find a status.
- Connection refused/reset and timeouts are `requests` exceptions -> RayUnavailable, as are
  502, 503 and 504 from a proxy in front of the dashboard.
- An unknown job is a 404 ("Job X does not exist") on the per-job endpoints -> JobNotFound.
- A reused submission id is a 500 whose body is the job agent's traceback ending in
  "ValueError: Job with submission_id X already exists". See `submit` for how we detect it.
- 401/403 become `ray.exceptions.AuthenticationError` inside the SDK -> RayRequestError.
- Anything else (4xx/5xx, a bad runtime_env rejected client-side, an unparsable answer)
  -> RayRequestError.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, NoReturn, SupportsFloat, SupportsIndex, TypeVar
from urllib.parse import quote

import aiohttp
import ray
import requests
from ray.dashboard.modules.dashboard_sdk import SubmissionClient
from ray.job_submission import JobDetails, JobSubmissionClient

from reconciler.shell.raycluster.census import RayCensus
from reconciler.shell.raycluster.logtail import LogRead, read_tail
from reconciler.shell.raycluster.poll import HTTPStatus as _HTTPStatusError
from reconciler.shell.raycluster.poll import KeptAliveGets, Unreachable
from reconciler.shell.raycluster.poll import shorten as _shorten
from specs.cluster import (
    Capacity,
    Census,
    Holdings,
    JobConflict,
    JobNotFound,
    RayError,
    RayJob,
    RayRequestError,
    RayUnavailable,
    SubmitRequest,
    TailLimits,
    cut_text,
)
from specs.task import submission_ids
from specs.task.status import TEXT_BYTES

log = logging.getLogger(__name__)

T = TypeVar("T")

_UNAVAILABLE_STATUSES = frozenset({502, 503, 504})
# Ray names each job's supervisor actor after the submission id (JOB_ACTOR_NAME_TEMPLATE).
_SUPERVISOR_PREFIX = "_ray_internal_job_actor_"
# The state API caps `limit` at 10,000 by default; ask for all of it so big clusters count.
_NODES_LIMIT = 10_000
# The live jobs looked up at once between listings (reconciler/shell/loop/jobview.py): a
# connection each, so that the look-ups of a small cluster's jobs take one round trip.
LOOKUPS_AT_ONCE = 8
# Where Ray's job supervisor writes a job's driver log, in the logs folder of its node
# (JOB_LOGS_PATH_TEMPLATE).
_DRIVER_LOG = "job-driver-{submission_id}.log"
_READ_CHUNK = 16 * 1024
_ERROR_BODY_BYTES = 4096  # of an error answer's body: enough to say why


class _Client(JobSubmissionClient):
    """JobSubmissionClient with a default timeout on every request and status-coded errors."""

    def __init__(
        self, address: str, *, timeout_seconds: float, headers: dict[str, Any] | None
    ) -> None:
        # JobSubmissionClient.__init__ is skipped on purpose: it lets RAY_ADDRESS or
        # RAY_API_SERVER_ADDRESS silently replace `address` (so a private head could end up
        # talking to a shared cluster), and it makes two untimed version checks.
        # SubmissionClient.__init__ does no I/O; we make one timed version check ourselves.
        self._timeout_seconds = timeout_seconds
        self._client_ray_version = ray.__version__
        SubmissionClient.__init__(self, address=address, headers=dict(headers or {}))
        response = self._do_request("GET", "/api/version")
        if response.status_code != 200:
            self._raise_error(response)
        try:
            self._server_ray_version = str(response.json()["ray_version"])
        except (ValueError, KeyError, TypeError) as exc:
            raise RayRequestError(f"{address} does not look like a Ray dashboard") from exc

    def _do_request(
        self,
        method: str,
        endpoint: str,
        *,
        data: bytes | None = None,
        json_data: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> requests.Response:
        # The SDK passes no timeout, so `requests` would wait forever on a hung dashboard.
        kwargs.setdefault("timeout", self._timeout_seconds)
        return super()._do_request(method, endpoint, data=data, json_data=json_data, **kwargs)

    def _raise_error(self, r: requests.Response) -> NoReturn:
        raise _HTTPStatusError(r.status_code, r.text)


class RayJobsAdapter:
    """RayAdapter over a Ray dashboard address such as http://127.0.0.1:8265.

    Thread-safe: every call is one or two independent HTTP requests; only the lazy creation
    of the SDK client is guarded by a lock.
    """

    def __init__(
        self,
        address: str,
        *,
        timeout_seconds: float = 10.0,
        headers: dict[str, str] | None = None,
        entrypoint_resources: bool = False,
    ) -> None:
        """`entrypoint_resources=True` (for --count-foreign-jobs) makes list_jobs fill in what
        each job reserved for its entrypoint, at the cost of one more call per listing."""
        if "://" not in address:
            address = f"http://{address}"
        scheme = address.split("://", 1)[0]
        if scheme not in ("http", "https"):
            raise ValueError(f"the Ray dashboard address must be http(s)://..., got {address}")
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        self.address = address.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self._headers = dict(headers or {})
        self.entrypoint_resources = entrypoint_resources
        self._client: _Client | None = None
        self._client_lock = threading.Lock()
        # The reads repeated every pass go over kept-alive connections (see poll.py); the
        # loop's look-ups of single jobs go out together, one connection each.
        self._dashboard: KeptAliveGets | None = None
        # The census reads go over connections of their own, never the loop's.
        self._census: RayCensus | None = None

    def __repr__(self) -> str:
        return f"RayJobsAdapter({self.address!r}, timeout_seconds={self.timeout_seconds})"

    # --- the RayAdapter protocol -------------------------------------------------------

    def list_jobs(self) -> Sequence[RayJob]:
        # The SDK's list_jobs is this same GET, parsed into a pydantic model per job.
        details = self._get_json("list jobs", "/api/jobs/")
        try:
            # Driver-only jobs (a script that called ray.init) have no submission id.
            jobs = [_job_from_json(d) for d in details if d.get("submission_id")]
        except (TypeError, ValueError, AttributeError) as exc:
            raise RayRequestError(f"unexpected job listing from {self.address}") from exc
        if not self.entrypoint_resources:
            return jobs
        claims = self._entrypoint_claims()
        return [
            replace(
                job,
                entrypoint_cpus=claims[job.submission_id].cpu,
                entrypoint_gpus=claims[job.submission_id].gpu,
                entrypoint_memory=claims[job.submission_id].memory,
            )
            if job.submission_id in claims
            else job
            for job in jobs
        ]

    def look_up_jobs(self, submission_ids: Iterable[str]) -> dict[str, RayJob | None]:
        """Each job's current state, one small GET per id, up to LOOKUPS_AT_ONCE of them sent
        together over kept-alive connections of their own (None: Ray has no such job). The
        loop asks this of the few live jobs between full listings: the listing grows with
        Ray's history, a look-up does not. Entrypoint resources are not filled in (a job's do
        not change: the caller keeps them from its listing)."""
        ids = list(submission_ids)
        what = "job info"
        try:
            answers = self._gets().get_all([f"/api/jobs/{_in_path(sid)}" for sid in ids])
        except Unreachable as exc:
            raise RayUnavailable(f"{what}: cannot reach the Ray dashboard: {exc}") from exc
        except ValueError as exc:
            raise RayRequestError(f"{what}: the dashboard's answer is not JSON") from exc
        found: dict[str, RayJob | None] = {}
        for sid, detail in zip(ids, answers, strict=True):
            if isinstance(detail, _HTTPStatusError):
                mapped = _map_error(detail, job=sid, what=what)
                if not isinstance(mapped, JobNotFound):
                    raise mapped from detail
                found[sid] = None
                continue
            try:
                job = _job_from_json(detail)
            except (TypeError, ValueError, AttributeError, KeyError) as exc:
                raise RayRequestError(f"unexpected job info from {self.address}") from exc
            found[sid] = job if job.submission_id == sid else None
        return found

    def _entrypoint_claims(self) -> dict[str, Capacity]:
        """What each live job reserved for its entrypoint, by submission id, in one call.

        The job REST API drops entrypoint_num_cpus & co. from its answers (Ray 2.60), but each
        job's supervisor actor is created with exactly those resources and is named after the
        submission id, so the state API's actor list has them.
        """
        endpoint = (
            f"/api/v0/actors?detail=1&limit={_NODES_LIMIT}"
            f"&timeout={max(1, math.ceil(self.timeout_seconds))}"
            "&filter_keys=class_name&filter_predicates=%3D&filter_values=JobSupervisor"
            "&filter_keys=state&filter_predicates=%21%3D&filter_values=DEAD"
        )

        payload = self._get_json("list job supervisors", endpoint)
        claims: dict[str, Capacity] = {}
        try:
            for actor in payload["data"]["result"]["result"]:
                name = str(actor.get("name") or "")
                if not name.startswith(_SUPERVISOR_PREFIX):
                    continue
                res = actor.get("required_resources") or {}
                claims[name.removeprefix(_SUPERVISOR_PREFIX)] = Capacity(
                    _number(res.get("CPU")), _number(res.get("GPU")), _number(res.get("memory"))
                )
        except (KeyError, TypeError, AttributeError) as exc:
            raise RayRequestError(f"unexpected actor listing from {self.address}") from exc
        return claims

    def capacity(self) -> Capacity:
        # The state API's node list: one call, with resources_total per node and a
        # server-side filter to alive nodes (dead ones stay listed for a while).
        endpoint = (
            f"/api/v0/nodes?detail=1&limit={_NODES_LIMIT}"
            f"&timeout={max(1, math.ceil(self.timeout_seconds))}"
            "&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"
        )

        payload = self._get_json("read capacity", endpoint)
        try:
            if not payload.get("result", False):
                raise RayRequestError(f"node listing failed: {payload.get('msg', '')}")
            nodes = payload["data"]["result"]["result"]
            total = Capacity()
            for node in nodes:
                if node.get("state") != "ALIVE":
                    continue
                res = node.get("resources_total") or {}
                total += Capacity(
                    float(res.get("CPU", 0.0)),
                    float(res.get("GPU", 0.0)),
                    float(res.get("memory", 0.0)),  # bytes since Ray 2.0
                )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RayRequestError(f"unexpected node listing from {self.address}") from exc
        return total

    def submit(self, request: SubmitRequest) -> None:
        """Submit a job; JobConflict if the submission id exists already.

        Ray answers a reused id with HTTP 500 and a traceback. We recognise it in two ways:
        first the message Ray 2.x writes ("Job with submission_id X already exists"); if
        that text ever changes, any other refusal (4xx/5xx) is followed by a look-up of the
        id: if a job with that id exists, the refusal was a conflict. The look-up is a
        fallback only, so a healthy submit stays one call. Any job holding the id is a
        conflict here; whether it is the run being submitted (sent before a crash) is for the
        next pass to judge, by the job's metadata (specs/task/ownership.py): a job that does
        not name this run is never adopted, shown or stopped as the task's.
        """
        sid = request.submission_id
        refused = submission_ids.unsubmittable(sid)
        if refused is not None:
            raise RayRequestError(f"not submitted: {refused}")

        def submit(c: _Client) -> None:
            c.submit_job(
                entrypoint=request.entrypoint,
                submission_id=sid,
                runtime_env=dict(request.runtime_env) if request.runtime_env else None,
                # A copy: the SDK merges its default metadata into the dict it is given.
                metadata=dict(request.metadata),
            )

        try:
            self._call(f"submit {sid}", submit, raw_status=True)
        except _HTTPStatusError as exc:
            if f"submission_id {sid} already exists" in exc.body:
                raise JobConflict(f"a job with submission id {sid} already exists") from exc
            if self._exists(sid):
                raise JobConflict(f"a job with submission id {sid} already exists") from exc
            raise RayRequestError(f"submit {sid}: {exc}") from exc

    def stop(self, submission_id: str) -> None:
        # Ray answers 200 with stopped=false for a job that has already ended: a success.
        path = _in_path(submission_id)
        self._call("stop", lambda c: c.stop_job(path), job=submission_id)

    def delete(self, submission_id: str) -> None:
        path = _in_path(submission_id)
        self._call("delete", lambda c: c.delete_job(path), job=submission_id)

    def logs(self, submission_id: str) -> str:
        path = _in_path(submission_id)
        logs = self._call("logs", lambda c: c.get_job_logs(path), job=submission_id)
        return str(logs)

    def log_tail(self, submission_id: str, limits: TailLimits) -> str:
        """The end of the job's log through Ray's state API, which reads a log file's last
        lines on the node of the job's driver (`lines=N`); each read stops at the budget
        (logtail.read_tail), so a huge line costs one budget, not the log. A job whose driver
        never started has no log: "". JobNotFound if Ray has no such job."""
        if limits.lines <= 0:
            return ""
        path = _in_path(submission_id)
        info = self._get_json("log tail", f"/api/jobs/{path}", job=submission_id)
        node = info.get("driver_node_id") if isinstance(info, dict) else None
        if not node:
            return ""
        query = f"node_id={quote(str(node), safe='')}&filename=" + quote(
            _DRIVER_LOG.format(submission_id=submission_id), safe=""
        )

        def read(lines: int, budget: int) -> LogRead:
            endpoint = f"/api/v0/logs/file?{query}&lines={lines}"
            try:
                return self._read_stream(endpoint, budget)
            except Exception as exc:
                raise _map_error(exc, job=None, what=f"log tail of {submission_id}") from exc

        return read_tail(read, limits)

    def _read_stream(self, endpoint: str, budget: int) -> LogRead:
        """A GET whose body is read only up to `budget` bytes; the connection is then closed
        (the SDK's requests read whole bodies)."""
        with requests.get(
            self.address + endpoint,
            headers=self._headers,
            stream=True,
            timeout=self.timeout_seconds,
        ) as response:
            if response.status_code != 200:
                body = response.raw.read(_ERROR_BODY_BYTES, decode_content=True)
                raise _HTTPStatusError(response.status_code, body.decode("utf-8", "replace"))
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_content(_READ_CHUNK):
                chunks.append(chunk)
                size += len(chunk)
                if size > budget:
                    break
        data = b"".join(chunks)
        return LogRead(data[:budget], size <= budget)

    # --- the CensusReader protocol ---------------------------------------------------------

    def take_census(self, drivers: Mapping[tuple[str, int], str] | None = None) -> Census:
        """What every Ray job holds (census.RayCensus): a few reads of the state API and the
        dashboard's node data, over connections of their own. CensusUnsupported when this
        dashboard has no state API."""
        return self._census_reader().take_census(drivers)

    def holdings_of(self, submission_id: str) -> Holdings | None:
        """What one job holds now in Ray's logical resources (three small reads filtered by
        its Ray job id); None while its driver has not started. JobNotFound if absent,
        CensusUnsupported when this dashboard has no state API."""
        job_id = self.job_info(submission_id).job_id
        return None if job_id is None else self._census_reader().holdings_of(job_id)

    def _census_reader(self) -> RayCensus:
        with self._client_lock:
            if self._census is None:
                self._census = RayCensus(
                    self.address, timeout_seconds=self.timeout_seconds, headers=self._headers
                )
            return self._census

    # --- extras ---------------------------------------------------------------------------

    def job_info(self, submission_id: str) -> RayJob:
        path = _in_path(submission_id)
        details = self._call("job info", lambda c: c.get_job_info(path), job=submission_id)
        return _to_ray_job(details)

    def tail_logs(self, submission_id: str) -> Iterator[str]:
        """Yield chunks of the job's log as it grows, until the job ends.

        A sync generator over the SDK's async websocket tail, driven by a private event
        loop; call it from a thread that is not running an event loop. Close the generator
        to stop following (this closes the websocket).
        """
        # A timed look-up first, so an unknown id or a dead dashboard fails with a typed
        # error before the (untimed) websocket is opened.
        self.job_info(submission_id)
        client = self._get_client()
        loop = asyncio.new_event_loop()
        chunks = client.tail_job_logs(_in_path(submission_id))
        try:
            while True:
                try:
                    chunk = loop.run_until_complete(anext(chunks))
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    raise _tail_error(submission_id, exc) from exc
                yield chunk
        finally:
            try:
                # Ray types the tail as an AsyncIterator; it is a generator that owns an
                # aiohttp session, and only aclose() releases it.
                if isinstance(chunks, AsyncGenerator):
                    loop.run_until_complete(chunks.aclose())
            except Exception:
                log.debug("closing the log tail of %s failed", submission_id, exc_info=True)
            finally:
                loop.close()

    # --- plumbing -------------------------------------------------------------------------

    def _get_client(self) -> _Client:
        with self._client_lock:
            if self._client is None:
                try:
                    self._client = _Client(
                        self.address, timeout_seconds=self.timeout_seconds, headers=self._headers
                    )
                except Exception as exc:
                    raise _map_error(exc, job=None, what=f"connect to {self.address}") from exc
            return self._client

    def _forget_client(self) -> None:
        # The dashboard may come back as a different Ray version: redo the version check.
        with self._client_lock:
            self._client = None
            if self._dashboard is not None:
                self._dashboard.close()
                self._dashboard = None

    def _call(
        self,
        what: str,
        fn: Callable[[_Client], T],
        *,
        job: str | None = None,
        raw_status: bool = False,
    ) -> T:
        """Run one SDK call with typed errors; raw_status lets the caller see HTTP errors."""
        try:
            return fn(self._get_client())
        except Exception as exc:
            if (
                raw_status
                and isinstance(exc, _HTTPStatusError)
                and exc.status not in _UNAVAILABLE_STATUSES
            ):
                raise
            mapped = _map_error(exc, job=job, what=what)
            if isinstance(mapped, RayUnavailable):
                self._forget_client()
            if mapped is exc:
                raise
            raise mapped from exc

    def _gets(self) -> KeptAliveGets:
        with self._client_lock:
            if self._dashboard is None or self._dashboard.address != self.address:
                self._dashboard = KeptAliveGets(
                    self.address,
                    timeout_seconds=self.timeout_seconds,
                    headers=self._headers,
                    width=LOOKUPS_AT_ONCE,
                )
            return self._dashboard

    def _get_json(self, what: str, endpoint: str, *, job: str | None = None) -> Any:
        """A polling GET over a kept-alive connection, with the SDK calls' typed errors."""
        try:
            return self._gets().get_json(endpoint)
        except _HTTPStatusError as exc:
            raise _map_error(exc, job=job, what=what) from exc
        except Unreachable as exc:
            raise RayUnavailable(f"{what}: cannot reach the Ray dashboard: {exc}") from exc
        except ValueError as exc:
            raise RayRequestError(f"{what}: the dashboard's answer is not JSON") from exc

    def _exists(self, submission_id: str) -> bool:
        try:
            self.job_info(submission_id)
        except JobNotFound:
            return False
        return True


def _in_path(submission_id: str) -> str:
    """The id as one URL path segment. The SDK pastes job ids into its URLs as they are, so an
    id such as `x/stop?` would address another job's endpoint; percent-encoded, every id names
    exactly the job it is (ids within the spec rule come out unchanged)."""
    return quote(submission_id, safe="")


def _map_error(exc: BaseException, *, job: str | None, what: str) -> RayError:
    where = f"{what} {job}" if job else what
    if isinstance(exc, RayError):
        return exc
    if isinstance(exc, _HTTPStatusError):
        if exc.status == 404 and job is not None:
            return JobNotFound(f"Ray has no job {job}")
        if exc.status in _UNAVAILABLE_STATUSES:
            return RayUnavailable(f"{where}: {exc}")
        return RayRequestError(f"{where}: {exc}")
    # requests.ConnectionError covers refused/reset/DNS and ConnectTimeout; Timeout covers
    # ReadTimeout; a connection cut mid-body surfaces as ChunkedEncodingError.
    if isinstance(
        exc,
        requests.ConnectionError
        | requests.Timeout
        | requests.exceptions.ChunkedEncodingError
        | ConnectionError
        | TimeoutError,
    ):
        return RayUnavailable(f"{where}: cannot reach the Ray dashboard: {exc}")
    return RayRequestError(f"{where}: {type(exc).__name__}: {_shorten(str(exc))}")


def _tail_error(submission_id: str, exc: Exception) -> RayError:
    if isinstance(exc, aiohttp.WSServerHandshakeError) and exc.status == 404:
        return JobNotFound(f"Ray has no job {submission_id}")
    # The SDK raises RuntimeError only when the websocket closes abnormally or errors.
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError | RuntimeError):
        return RayUnavailable(f"log tail of {submission_id} broke: {exc}")
    return _map_error(exc, job=submission_id, what="log tail")


def _to_ray_job(d: JobDetails) -> RayJob:
    status = d.status.value if hasattr(d.status, "value") else str(d.status)
    return RayJob(
        submission_id=str(d.submission_id),
        status=str(status),
        entrypoint=d.entrypoint or "",
        message=cut_text(d.message or "", TEXT_BYTES),  # Ray's holds up to 20,000 chars of log
        # Ray keeps milliseconds; start_time is when the job was submitted, not when it ran.
        start_time=d.start_time / 1000 if d.start_time else None,
        end_time=d.end_time / 1000 if d.end_time else None,
        metadata=dict(d.metadata or {}),
        exit_code=_exit_code(getattr(d, "driver_exit_code", None)),
        job_id=_job_id(getattr(d, "job_id", None)),
        driver_node_id=_job_id(getattr(d, "driver_node_id", None)),
        driver_pid=_pid(getattr(getattr(d, "driver_info", None), "pid", None)),
    )


def _job_from_json(d: dict[str, Any]) -> RayJob:
    """One job of GET /api/jobs/ (Ray's JobDetails as JSON), read as _to_ray_job reads the
    model."""
    start, end = d.get("start_time"), d.get("end_time")
    return RayJob(
        submission_id=str(d["submission_id"]),
        status=str(d.get("status") or ""),
        entrypoint=str(d.get("entrypoint") or ""),
        message=cut_text(str(d.get("message") or ""), TEXT_BYTES),
        start_time=float(start) / 1000 if start else None,
        end_time=float(end) / 1000 if end else None,
        metadata={str(k): str(v) for k, v in (d.get("metadata") or {}).items()},
        exit_code=_exit_code(d.get("driver_exit_code")),
        job_id=_job_id(d.get("job_id")),
        driver_node_id=_job_id(d.get("driver_node_id")),
        driver_pid=_pid((d.get("driver_info") or {}).get("pid")),
    )


def _job_id(value: object) -> str | None:
    """One of Ray's ids (hex), set once the driver has started; None before."""
    return value if isinstance(value, str) and value else None


def _pid(value: object) -> int | None:
    """The driver's pid, which Ray's job info writes as a string."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    try:
        pid = int(value)
    except ValueError:
        return None
    return pid if pid > 0 else None


def _exit_code(value: object) -> int | None:
    """JobDetails.driver_exit_code (Ray 2.60); getattr'd, so an older Ray just gives None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _number(value: object) -> float:
    """A resource figure from Ray's job info; absent or odd values count as nothing."""
    if not isinstance(value, str | bytes | SupportsFloat | SupportsIndex):
        return 0.0
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) and number > 0 else 0.0
