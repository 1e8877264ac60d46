"""The whole queue tree: the top `_queues.yaml` and each queue's own file (nested queues), read
the way serve reads them. Shared by serve's loop, `rayqueue validate` and the API's check of a
team's edit, so the three cannot disagree on what the tree is."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specs.queues.bounds import Bounded, bound_entries
from specs.queues.config import CONFIG_FILE, DEFAULT_QUEUE_DEPTH, QueueConfig
from specs.queues.parse import parse_queue_config, parse_sub_queue_config
from specs.task.errors import SpecError
from specs.yamlio.errors import Problem
from specs.yamlio.parse import MAX_FILE_BYTES, SpecParseError, locate

Reader = Callable[[Path], bytes | None]  # a file's bytes; None when it does not exist


def read_from_disk(path: Path) -> bytes | None:
    """The file, or None if absent; a file over the size limit raises SpecParseError."""
    try:
        size = path.stat().st_size
    except (FileNotFoundError, NotADirectoryError):
        return None
    if size > MAX_FILE_BYTES:
        raise _too_big(str(path))
    return path.read_bytes()


def divide_tree(
    config: QueueConfig,
    root: Path,
    max_depth: int = DEFAULT_QUEUE_DEPTH,
    watched: list[Path] | None = None,
    prefix: str = "",
    read: Reader = read_from_disk,
    bounded: list[Bounded] | None = None,
    kept: KeptFiles | None = None,
) -> QueueConfig:
    """Add each queue's own sub-queues, from `<root>/<queue>/_queues.yaml` (nested queues),
    parents before their sub-queues, each bounded by what its parent grants
    (`specs.queues.bounds`): a file a team can write divides its queue, never widens it. A bad
    file raises SpecParseError naming it (`prefix`, then its path under root), line and field,
    unless `kept` is given: then a bad file is set aside (its errors in `kept.errors`) and its
    last good text, if `kept.last_good` has one that still fits the tree, is read instead, so
    one team's broken file holds back neither the top file's edits nor the other teams'.
    `watched` gets every path looked at, present or not; `bounded`, every field bounded."""
    pending = [entry.name for entry in config.spec.queues]
    while pending:
        folder = pending.pop(0)
        path = root / folder / CONFIG_FILE
        if watched is not None:
            watched.append(path)
        file = f"{prefix}{folder}/{CONFIG_FILE}"
        for text, fresh in _texts(read, path, file, kept):
            try:
                sub = parse_sub_queue_config(
                    text,
                    file=file,
                    folder=folder,
                    folder_depth=config.depth_of(folder),
                    listed=config.queue_names(),
                    max_depth=max_depth,
                )
            except SpecParseError as exc:
                if kept is None:
                    raise
                if fresh:  # the file as it is; its last good text goes unreported
                    kept.errors.extend(exc.errors)
                continue
            entries, found = bound_entries(config, sub.spec.queues, _locator(text, file))
            if bounded is not None:
                bounded.extend(found)
            if kept is not None:
                kept.good[path] = text
            spec = config.spec.model_copy(update={"queues": [*config.spec.queues, *entries]})
            config = config.model_copy(update={"spec": spec})
            pending.extend(entry.name for entry in entries)
            break
    return config


def _texts(read: Reader, path: Path, file: str, kept: KeptFiles | None) -> list[tuple[bytes, bool]]:
    """The texts to try for one queue's own file, each with whether it is the file as it is
    now: that one, then, with `kept`, its last good text; none when the file does not exist."""
    texts: list[tuple[bytes, bool]] = []
    try:
        data = read(path)
        if data is None:
            return []
        if len(data) > MAX_FILE_BYTES:
            raise _too_big(file)
        texts.append((data, True))
    except SpecParseError:
        if kept is None:
            raise _too_big(file) from None
        kept.errors.extend(_too_big(file).errors)
    last = kept.last_good.get(path) if kept is not None else None
    if last is not None and all(last != text for text, _ in texts):
        texts.append((last, False))
    return texts


@dataclass
class KeptFiles:
    """The queues' own files across reads of the tree (serve's loop): `last_good`, the text of
    each that last read well, in; `good`, the same after this read, and `errors`, each bad
    file's problems, out."""

    last_good: Mapping[Path, bytes] = field(default_factory=dict)
    good: dict[Path, bytes] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)


def _locator(data: bytes, file: str) -> Callable[[Sequence[Problem]], list[SpecError]]:
    return lambda problems: locate(data, file=file, problems=problems)


def _too_big(file: str) -> SpecParseError:
    message = f"file is larger than the {MAX_FILE_BYTES // 1024} KiB limit"
    return SpecParseError([SpecError(file, None, None, None, message)])


def check_sub_queue_edit(root: Path, top: bytes | None, file: str, data: bytes) -> list[Bounded]:
    """Would serve take `data` as the queue file `file` (`team-a/_queues.yaml`, under `root`)?
    Checked alone (only folders under its own, within the depth limit), then inside the whole
    tree as the loop reads it with this edit in place (a sub-queue listed by another queue's
    file too, a depth counted through the files above). Raises SpecParseError when a problem
    is this file's; a tree broken elsewhere is reported by serve, and does not block an edit
    that is right in itself. Returns the fields of this file bounded by their parents."""
    folder = file.rpartition("/")[0]
    config: QueueConfig | None = None
    if top is not None:
        try:
            config = parse_queue_config(top)
        except SpecParseError:
            config = None
    parse_sub_queue_config(
        data,
        file=file,
        folder=folder,
        folder_depth=config.depth_of(folder) if config is not None else 1,
        listed=config.queue_names() if config is not None else (),
    )
    if config is None:
        return []
    edited = root / file

    def read(path: Path) -> bytes | None:
        return data if path == edited else read_from_disk(path)

    bounded: list[Bounded] = []
    try:
        divide_tree(config, root, read=read, bounded=bounded)
    except SpecParseError as exc:
        mine = [error for error in exc.errors if error.file == file]
        if mine:
            raise SpecParseError(mine) from None
    return [item for item in bounded if item.note.file == file]
