"""Root conftest: registers the shared plugins, and imports nothing that imports `ray`.

pytest allows `pytest_plugins` only here, so the Ray-head fixtures are registered for every
suite; the plugin itself imports the Ray adapter only when a test asks for it.
"""

from __future__ import annotations

pytest_plugins = ["tests.support.ray_head", "tests.support.autoscaling_head"]
