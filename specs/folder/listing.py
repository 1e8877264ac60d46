"""The store's walk of a folder: regular files only, symlinks followed only within the
folder, loops and cross-team links caught, unreadable parts reported, each warning logged once.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specs.folder.paths import (
    MAX_DIRECTORIES,
    FolderUnavailable,
    InvalidName,
    crossing,
    dir_id,
    inside,
    team_folder,
)

log = logging.getLogger("rayqueue.store")


@dataclass
class Walk:
    """What one walk of a folder found."""

    files: list[tuple[str, os.DirEntry[str]]]  # (relative path, entry), regular files only
    unreadable: list[str]  # relative files and "dir/" prefixes we could not read
    links: bool = False  # a symlink somewhere: file events cannot be mapped to names
    # Files reached through a symlink from one team folder into another: why each is refused.
    crossings: dict[str, str] = field(default_factory=dict)


class FolderLister:
    """Walks the tasks folder (and the status folder) of one store; warns once per path and
    message, however often a walk meets the same trouble."""

    def __init__(self, root: Path, status_dir: Path | None) -> None:
        self._root = root
        self._status_dir = status_dir
        self._warned: set[tuple[str, str]] = set()

    def real_dir(self, directory: Path) -> str:
        """Resolve on every call: git-sync swaps the root symlink to a new worktree."""
        real = os.path.realpath(directory)
        try:
            st = os.stat(real)
        except FileNotFoundError as exc:
            raise FolderUnavailable(f"folder {directory} does not exist") from exc
        except OSError as exc:
            raise FolderUnavailable(f"folder {directory} is unreadable: {exc.strerror}") from exc
        if not stat.S_ISDIR(st.st_mode):
            raise FolderUnavailable(f"folder {directory} is not a directory")
        return real

    def walk(self, top: str, accept: Callable[[str], bool], skip: tuple[int, int] | None) -> Walk:
        """Iterative walk yielding accepted regular files; follows symlinks only within `top`."""
        walk = Walk([], [])
        top_id = dir_id(top)
        # (folder as walked, its relative path, ancestors, its real path if reached through a
        # symlink: then each file's real path is known without another system call)
        stack: list[tuple[str, str, frozenset[tuple[int, int] | None], str | None]] = [
            (top, "", frozenset({top_id}), None)
        ]
        visited = 0
        while stack:
            directory, rel, ancestors, real_dir = stack.pop()
            visited += 1
            if visited > MAX_DIRECTORIES:
                self.warn_once(top, f"more than {MAX_DIRECTORIES} folders; the rest is skipped")
                walk.unreadable.append(rel)
                continue
            try:
                with os.scandir(directory) as listing:
                    children = list(listing)
            except FileNotFoundError:
                if not rel:
                    raise FolderUnavailable(f"folder {top} disappeared") from None
                continue
            except OSError as exc:
                if not rel:
                    raise FolderUnavailable(f"folder {top} is unreadable: {exc.strerror}") from exc
                self.warn_once(directory, f"cannot list folder: {exc.strerror}")
                walk.unreadable.append(rel)
                continue
            for child in children:
                if child.name.startswith("."):
                    continue  # hidden: .git, .rayqueue, editor temp files, our temp files
                child_rel = rel + child.name
                try:
                    link = child.is_symlink()
                    walk.links = walk.links or link
                    real = None
                    if link:
                        real = os.path.realpath(child.path)
                        if not inside(real, top):
                            self.warn_once(child.path, "symlink points outside the folder; ignored")
                            continue
                    elif real_dir is not None:
                        real = os.path.join(real_dir, child.name)
                    if child.is_dir():
                        st = child.stat()
                        ident = (st.st_dev, st.st_ino)
                        if ident == skip:
                            continue
                        if ident in ancestors:
                            self.warn_once(child.path, "symlink loop; not followed")
                            continue
                        stack.append((child.path, child_rel + "/", ancestors | {ident}, real))
                    elif child.is_file() and accept(child.name):
                        walk.files.append((child_rel, child))
                        refusal = None if real is None else crossing(child_rel, real, top)
                        if refusal is not None:
                            walk.crossings[child_rel] = refusal
                except FileNotFoundError:
                    continue  # deleted while we looked
                except OSError as exc:
                    self.warn_once(child.path, f"cannot read: {exc.strerror}")
                    walk.unreadable += [child_rel, child_rel + "/"]  # a file, or a folder
        return walk

    def crosses(self, path: Path) -> bool:
        """Whether the sidecar `path` would land, through a symlinked folder, in another
        team folder than its name says (only possible when the last walk met a symlink)."""
        base = self._root if self._status_dir is None else self._status_dir
        rel = os.path.relpath(path, base).replace(os.sep, "/")
        real_base = os.path.realpath(base)
        real = os.path.join(os.path.realpath(path.parent), path.name)
        if not inside(real, real_base):
            return True
        real_rel = os.path.relpath(real, real_base).replace(os.sep, "/")
        return team_folder(rel) != team_folder(real_rel)

    def check_inside(self, path: Path, name: str) -> None:
        root = os.path.realpath(self._root)
        if not inside(os.path.realpath(path), root):
            raise InvalidName(f"task name {name!r} resolves outside the tasks folder")

    def warn_once(self, path: str, message: str) -> None:
        if (path, message) not in self._warned:
            self._warned.add((path, message))
            log.warning("%s: %s", path, message)
