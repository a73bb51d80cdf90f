"""The words everything else is written in: CAPTF's API names, Kubernetes time formats,
serial numbers, and redaction. Imports nothing of the core."""
