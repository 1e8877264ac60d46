"""The reconcile loop: read the folder and Ray, plan, write statuses, act on Ray, and report."""
