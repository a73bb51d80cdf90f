"""CAPTF: runs Terraform/OpenTofu operations as Kubernetes Jobs.

`controller.core` holds the pure decision functions (no I/O, no asyncio);
the I/O that applies them sits at the edges."""
