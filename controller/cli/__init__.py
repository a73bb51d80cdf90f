"""The command line: `captf` and its verbs (controller/cli/main.py declares them,
dev_parsers.py those of `bench` and `dev`), the snapshot files `captf decide -f`
reads, the live reads of `--live`, and the verbs for people (people/)."""
