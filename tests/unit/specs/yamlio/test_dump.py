"""specs/yamlio/dump.py: the hand-written fast path for sidecars writes exactly what PyYAML
writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from specs.task.models import Condition, Metadata, Phase, SourceRef
from specs.task.status import TaskStatus, TaskStatusBody
from specs.yamlio import dump
from specs.yamlio.parse import parse_status

TRICKY = [
    "",
    " ",
    "a",
    "true",
    "yes",
    "No",
    "on",
    "null",
    "~",
    "123",
    "0x1f",
    "1e3",
    "1_000",
    ".5",
    ".inf",
    "-",
    "- a",
    ">100",
    "<10",
    "!x",
    "&a",
    "*a",
    "%x",
    "@x",
    "`x",
    "a: b",
    "a:b",
    "a:",
    "a #b",
    "a#b",
    "#a",
    "'q'",
    '"q"',
    "it's",
    "a,b",
    "[a]",
    "{a}",
    "a b ",
    " a",
    "2026-12-01T15:41:10.820Z",
    "2026-12-01",
    "12:30",
    "1:20:30",
    "main@sha1:0123456789abcdef0123456789abcdef01234567",
    "WaitingBehindHigherPriority; at least 100 tasks ahead",
    "rq-t00001-fd33ae6a-1",
    "(a)",
    "a=b",
    "é",
    "a\tb",
    "a\nb",
    "x" * 300,
    "?",
    "? a",
    "a?",
    "=",
    "<<",
]


def via_pyyaml(document: dict[str, Any]) -> str:
    return dump._dump(document)


@given(
    st.lists(
        st.one_of(
            st.sampled_from(TRICKY),
            st.text(alphabet=" abc:#-'\"?,[]{}&*!|>%@`~=0123456789.eE_+()T\\é", max_size=12),
        ),
        min_size=6,
        max_size=6,
    ),
    st.integers(-(2**40), 2**40),
    st.booleans(),
)
@settings(max_examples=500, deadline=None)
def test_the_fast_path_writes_what_pyyaml_writes(words: list[str], number: int, flag: bool) -> None:
    document: dict[str, Any] = {
        "apiVersion": "rayqueue/v1",
        "kind": "TaskStatus",
        "metadata": {"name": words[0]},
        "status": {
            "phase": words[1],
            "message": words[2],
            "run": number,
            "afterPreemption": flag,
            "conditions": [
                {"type": words[3], "reason": words[4], "lastTransitionTime": words[5]},
                {"type": "B", "status": "False", "message": words[2]},
            ],
        },
    }
    fast = dump._plain_block(document)
    if fast is not None:
        assert fast == via_pyyaml(document)
        assert yaml.safe_load(fast) == document


@given(st.text(alphabet="abefnoltrsuxyABEFNOLTRSUXY0123456789", min_size=1, max_size=8))
@settings(max_examples=1000, deadline=None)
def test_a_word_of_letters_and_digits_is_written_as_pyyaml_writes_it(word: str) -> None:
    # Names, uids and hashes take a shortcut past the resolver; YAML's words for booleans
    # and null (in any case), ints in base 2 and 16 and digits alone must not.
    written = dump._scalar(word)
    expected = via_pyyaml({"k": word})
    assert written is None or f"k: {written}\n" == expected
    for tricky in ("yes", "No", "TRUE", "off", "On", "null", "0b101", "0x1f", "123", "1e3"):
        written = dump._scalar(tricky)
        assert written is None or f"k: {written}\n" == via_pyyaml({"k": tricky})


def _usual_status(**fields: Any) -> TaskStatus:
    """A waiting task's status as the loop writes them by the thousand; `fields` add to it."""
    return TaskStatus(
        metadata=Metadata(name="t00001"),
        status=TaskStatusBody(
            phase=Phase.QUEUED,
            reason="WaitingBehindHigherPriority",
            message="WaitingBehindHigherPriority; at least 100 tasks ahead",
            uid="fd33ae6a",
            queued_at=datetime(2026, 12, 1, 15, 41, 10, 820000, tzinfo=UTC),
            **fields,
        ),
    )


def test_a_usual_status_takes_the_fast_path_and_reads_back() -> None:
    status = _usual_status(
        queue_position_bucket=">100",
        spec_hash="0c3e567b8830fde8",
        run=2,
        conditions=[
            Condition(
                type="Preempted",
                reason="WithinQueue",
                last_transition_time="2026-12-01T15:41:10.820Z",
            )
        ],
    )
    document = status.to_document()
    assert dump._plain_block(document) is not None
    assert dump.dump_status(status) == via_pyyaml(document)
    assert parse_status(dump.dump_status(status)) == status


def test_text_the_fast_path_is_unsure_of_goes_through_pyyaml() -> None:
    status = TaskStatus(
        metadata=Metadata(name="t"),
        status=TaskStatusBody(phase=Phase.FAILED, log_tail="line one\nline two\n"),
    )
    assert dump._plain_block(status.to_document()) is None
    assert "logTail: |" in dump.dump_status(status)


# --- the direct path: from a status's fields, without model_dump ------------------------------

WORDS = st.one_of(
    st.sampled_from(TRICKY),
    st.text(alphabet=" abc:#-'\"?,[]{}&*!|>%@`~=0123456789.eE_+()T\\é\n", max_size=12),
)
TIMES = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
SMALL = st.integers(-(2**40), 2**40)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


CONDITIONS = st.builds(
    Condition,
    type=WORDS,
    status=st.sampled_from(["True", "False", "Unknown"]),
    reason=WORDS,
    message=st.one_of(st.just(""), WORDS),
    lastTransitionTime=TIMES,  # by alias: builds fills a required parameter by its own name
)
BODIES = st.builds(
    TaskStatusBody,
    phase=st.sampled_from(list(Phase)),
    reason=maybe(WORDS),
    message=maybe(WORDS),
    queue=maybe(WORDS),
    queue_position=maybe(SMALL),
    queue_position_bucket=maybe(st.sampled_from([">100", ">1000", ">10000"])),
    estimated_start_at=maybe(TIMES),
    uid=maybe(WORDS),
    run=SMALL,
    submission_id=maybe(WORDS),
    spec_hash=maybe(WORDS),
    ray_status=maybe(WORDS),
    queued_at=maybe(TIMES),
    scale_up_requested_at=maybe(TIMES),
    submitted_at=maybe(TIMES),
    started_at=maybe(TIMES),
    finished_at=maybe(TIMES),
    missing_since=maybe(TIMES),
    over_since=maybe(TIMES),
    lost_restarts=st.integers(0, 5),
    retries=st.integers(0, 5),
    next_retry_at=maybe(TIMES),
    exit_code=maybe(SMALL),
    preemptions=st.integers(0, 3),
    preempted_by=maybe(WORDS),
    after_preemption=st.booleans(),
    log_tail=maybe(WORDS),
    source=maybe(st.builds(SourceRef, revision=WORDS, dirty=st.booleans())),
    conditions=st.lists(CONDITIONS, max_size=3),
)
STATUSES = st.builds(
    TaskStatus,
    metadata=st.builds(
        Metadata,
        name=maybe(WORDS),
        labels=st.dictionaries(WORDS, WORDS, max_size=1),
        annotations=st.dictionaries(WORDS, WORDS, max_size=1),
    ),
    status=BODIES,
)


def via_document(status: TaskStatus) -> str:
    """What dump_status writes without the direct path: the document, then the walk or PyYAML."""
    document = status.to_document()
    fast = dump._plain_block(document)
    return fast if fast is not None else dump._dump(document)


@given(STATUSES)
@settings(max_examples=1500, deadline=None)
def test_the_direct_path_writes_the_document_paths_bytes(status: TaskStatus) -> None:
    direct = dump._direct(status)
    if direct is not None:
        assert direct == via_document(status)
        assert yaml.safe_load(direct) == status.to_document()
    assert dump.dump_status(status) == via_document(status)


def test_a_usual_status_takes_the_direct_path() -> None:
    status = _usual_status(
        queue_position=3,
        source=SourceRef(revision="main@sha1:" + "0" * 40, dirty=True),
        conditions=[
            Condition(
                type="Preempted",
                reason="WithinQueue",
                last_transition_time=datetime(2026, 12, 1, tzinfo=UTC),
            )
        ],
    )
    direct = dump._direct(status)
    assert direct is not None
    assert direct == via_document(status)
    assert "queuedAt: '2026-12-01T15:41:10.820Z'\n" in direct
    assert parse_status(direct) == status
