"""Local development: what `make run` and the tests start on this machine."""
