"""A kubelet and Job-controller stand-in: runs labelled Jobs as local processes and
writes their status as the Job controller would (development and tests only)."""

from controller.core.names import ANN_SIMULATE_DRAIN
from controller.executor.executor import Executor
from controller.executor.status import Reason

__all__ = ["ANN_SIMULATE_DRAIN", "Executor", "Reason"]
