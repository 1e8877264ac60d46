"""Resources in words, as statuses, events and errors write them: '2 CPU, 1 GPU'."""

from __future__ import annotations

import math

from specs.cluster import Capacity
from specs.task.quantity import human_memory

__all__ = ["amount", "resources_text", "unit"]


def amount(resource: str, value: float) -> str:
    if resource == "memory":
        return "unlimited" if math.isinf(value) else human_memory(value)
    return "unlimited" if math.isinf(value) else f"{value:g}"


def resources_text(req: Capacity) -> str:
    """The resources it asks for, in words: '2 CPU, 1 GPU'."""
    parts = []
    if req.cpu:
        parts.append(f"{req.cpu:g} CPU")
    if req.gpu:
        parts.append(f"{req.gpu:g} GPU")
    if req.memory:
        parts.append(f"{human_memory(req.memory)} memory")
    return ", ".join(parts)


def unit(resource: str) -> str:
    return {"cpu": "CPU", "gpu": "GPU", "memory": "memory"}[resource]
