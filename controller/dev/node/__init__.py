"""The process node: a Node whose pods run as local processes (development and tests).

It stands where a kubelet stands: pods reach it through the API server, bound
by it, and their status comes back from it. kube-controller-manager's Job and
Deployment controllers do the rest. See docs/node.md."""

from controller.dev.node.drain import cordon, drain
from controller.dev.node.images import Image, ImageTable, default_images
from controller.dev.node.node import ProcessNode

__all__ = [
    "Image",
    "ImageTable",
    "ProcessNode",
    "cordon",
    "default_images",
    "drain",
]
