"""Leases as data: the run slots and operation Leases a Job takes before it exists, the
cluster/member exclusion on the cluster's operation Lease, and which holds are stale."""
