"""Test helpers shared by every suite: a fake clock, a polling wait, a Reconciler world over
FakeRay, and the real local Ray head as a pytest plugin (`tests.support.ray_head`)."""
