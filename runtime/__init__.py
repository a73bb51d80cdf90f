"""A small asyncio controller runtime: raw watch streams, indexed caches, a
de-duplicating rate-limited work queue, leader election and metrics.

It knows nothing of Terraform or CAPTF; `controller` builds on it, never the
reverse (enforced by import-linter)."""
