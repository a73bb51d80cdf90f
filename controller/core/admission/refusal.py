"""A refusal: the field and the rule it breaks.

Neither part carries a value of the object: a value may come from a Secret (or be one
pasted by mistake), and refusals reach the requester, the audit log and conditions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    field: str  # a path such as spec.source.image
    rule: str  # what the field must satisfy, in words

    @property
    def message(self) -> str:
        return f"{self.field}: {self.rule}"


def refusals_message(refusals: Iterable[Refusal]) -> str:
    """One line for all refusals, in the order found."""
    return "; ".join(refusal.message for refusal in refusals)
