"""Test helpers shared by every suite: a fake clock, a polling wait, a Reconciler world over
FakeRay (`world.World`), the pure planner's harness (`planner_world.PlanWorld`), and the real
local Ray head as a pytest plugin (`tests.support.ray_head`)."""
