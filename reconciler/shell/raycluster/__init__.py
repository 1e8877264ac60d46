"""Everything that talks to Ray: the real adapter (`adapter.RayJobsAdapter`), the fake one
(`fake.FakeRay`), the autoscaler's report (`autoscaler.RayAutoscaler`), the dashboard's kept-alive
reads (`poll.KeptAliveGets`) and a private local head (`local_head.LocalRayHead`).

Import the module you need: this package does not import them, so that using the fake or the
local head never imports Ray itself (the pure test suites run where `import ray` fails)."""
