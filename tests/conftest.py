"""Root conftest: registers the shared plugins, and imports nothing that imports `ray`.

pytest allows `pytest_plugins` only here, so the Ray-head fixtures are registered for every
suite; the plugin itself imports the Ray adapter only when a test asks for it.
"""

from __future__ import annotations

import os

from hypothesis import settings

# CI runs every property on the same examples (seeded from each test's own code), so a red CI
# means a change broke something, not that a run drew an unlucky case; runs elsewhere draw anew
# and keep exploring (.ci/run sets the profile; the notes give the larger runs).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])

pytest_plugins = ["tests.support.ray_head", "tests.support.autoscaling_head"]
