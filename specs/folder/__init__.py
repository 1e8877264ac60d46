"""The tasks folder as a database: spec files in, status sidecars out, atomic writes, change
scans by file events and full listings of the folder.

`TaskStore` (store.py) is the database; it builds and owns a folder lister (listing.py), the
scan of the specs (changes.py, reading each file through specfiles.py), the arrays' entries
and sidecars (arrayfiles.py) and the status sidecars (statusfiles.py). paths.py holds the
name rules, paths and plain file reads they share; atomic.py the atomic file writes.

Nothing inside this package imports the package itself (only its modules), so importing any
of its modules never runs into this file half-done.
"""

from specs.folder.atomic import replace_file, sync_folders, write_atomic
from specs.folder.paths import (
    MAX_NAME_LENGTH,
    SIDECAR_SUFFIXES,
    STATUS_SUFFIX,
    TASK_SUFFIXES,
    FolderSettling,
    FolderUnavailable,
    InvalidName,
    validate_name,
)
from specs.folder.store import TaskStore

__all__ = [
    "MAX_NAME_LENGTH",
    "SIDECAR_SUFFIXES",
    "STATUS_SUFFIX",
    "TASK_SUFFIXES",
    "FolderSettling",
    "FolderUnavailable",
    "InvalidName",
    "TaskStore",
    "replace_file",
    "sync_folders",
    "validate_name",
    "write_atomic",
]
