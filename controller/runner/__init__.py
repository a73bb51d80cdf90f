"""The runner: the entrypoint of the runner image, one Job's operation with OpenTofu.

`captf runner` reads its instructions from the environment (`env`), renders the
durable inputs into a work directory, runs `tofu` (`tofu`), keeps the state in
its Secret with backups (`state`), and reports the outcome on its own Job
(`result`). The op logic is in `ops`; `main` wires the real API and process."""
