"""Which task may name which: the team folders of the tasks folder, as the team tokens file
draws them (specs/tenancy builds a Visibility from it), handed to the pure planner as a value.

A task's status, its messages and its dependencies' outcomes are read by whoever may read the
task: the token(s) that write its folder and any `read` token whose folders hold it. A token
that reads only its own folders (`read: own`) must not learn of another folder's tasks through
a task it reads, so a task may see (depend on, name in its messages) only the tasks every such
reader of it may read. Tokens that read everything (admins, `read: all`) add no limit: without
team tokens every task sees every other, as in one folder.

A task's folder, for what one task may do to another (an explicit id one claims and another
keeps), is the set of tokens that write it: two tasks written by the same tokens are of one
folder, whatever their paths.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

TOP: Final = "/"  # the folder entry for the whole tree
ANOTHER_FOLDER: Final = (
    "a task of another folder"  # what a task is called where it may not be named
)


def under(folders: Iterable[str], name: str) -> bool:
    """Whether the task (or folder) `name` lies under one of `folders` (prefixes of whole
    segments, "team-a" or "team-a/nlp", or TOP). `name` must be a valid task name: no `..`,
    no empty segment, so a prefix test on whole segments is exact."""
    return any(folder == TOP or name.startswith(folder + "/") for folder in folders)


@dataclass(frozen=True)
class Visibility:
    """The folders of the tokens that limit what a task may see, and of those that write only
    part of the tree. Empty (EVERYTHING): no team tokens, every task sees every other."""

    # The folders of each token that reads only its own (`read: own`).
    readers: tuple[tuple[str, ...], ...] = ()
    # The folders of each token that writes only some folders (not the whole tree).
    writers: tuple[tuple[str, ...], ...] = ()

    def sees(self, task: str, other: str) -> bool:
        """May the folder of `task` see the task `other`: may every token that reads `task`
        read `other` too? (So `task`'s status may name it, and `task` may depend on it.)"""
        return all(under(folders, other) for folders in self.readers if under(folders, task))

    def same_folder(self, task: str, other: str) -> bool:
        """Are `task` and `other` of one folder: written by the same tokens?"""
        return all(under(folders, task) == under(folders, other) for folders in self.writers)

    def name_for(self, task: str, other: str) -> str:
        """How a message of `task` calls the task `other`: by its name where `task`'s folder
        may see it, else ANOTHER_FOLDER."""
        return other if self.sees(task, other) else ANOTHER_FOLDER


EVERYTHING: Final = Visibility()

__all__ = ["ANOTHER_FOLDER", "EVERYTHING", "TOP", "Visibility", "under"]
