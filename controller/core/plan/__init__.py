"""The plan of one pass: the decision plus everything io writes for it (accountings, the
launch, pruning, the status, Events, the finalizer), as data."""
