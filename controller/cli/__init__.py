"""The command line: `captf` and its verbs (controller/cli/main.py declares them),
the snapshot files `captf decide -f` reads, the live reads of `--live`, and the
verbs for people (people/)."""
