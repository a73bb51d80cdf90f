"""Local development: what `make run` and the tests start on this machine: the process node,
the install from manifests/, the timeline of the controller's replicas."""
