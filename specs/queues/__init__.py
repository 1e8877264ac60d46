"""The queue configuration (`_queues.yaml`): the document, its parsing, and the whole queue tree
read from the top file and each team's own."""

from specs.queues.config import (
    CONFIG_FILE,
    DEFAULT_HALF_LIFE,
    DEFAULT_QUEUE,
    DEFAULT_QUEUE_DEPTH,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    STATUS_FILE,
    UNLIMITED,
    ClusterSection,
    FairSharing,
    NodeTypeEntry,
    Overuse,
    PreemptionConfig,
    QueueConfig,
    QueueEntry,
    Quota,
    config_path,
    is_reserved,
    parse_capacity,
    parse_duration,
    status_path,
)
from specs.queues.parse import parse_queue_config
from specs.queues.tree import check_sub_queue_edit, divide_tree

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_HALF_LIFE",
    "DEFAULT_QUEUE",
    "DEFAULT_QUEUE_DEPTH",
    "LESS_THAN_OR_EQUAL_TO_FINAL_SHARE",
    "STATUS_FILE",
    "UNLIMITED",
    "ClusterSection",
    "FairSharing",
    "NodeTypeEntry",
    "Overuse",
    "PreemptionConfig",
    "QueueConfig",
    "QueueEntry",
    "Quota",
    "check_sub_queue_edit",
    "config_path",
    "divide_tree",
    "is_reserved",
    "parse_capacity",
    "parse_duration",
    "parse_queue_config",
    "status_path",
]
