"""The static cost of a rule: how many steps one evaluation may take, as a function of
the largest collection in its input.

The model is cel-go's estimator made small. Every node of the checked tree costs one
step; a membership test (`x in list`) costs one step per element of the largest
collection, `n`, unless the list's size is known; a comprehension costs its range, its
start and its result once, and its loop (condition and step) once per element, `n`
times, so comprehensions nested two deep cost `n**2`. A comprehension that builds a list
(`filter`, `map`) copies its result at each step in cel-cpp, which has no in-place
append: its loop costs `n` more per element, `n**2` in all. The cost is a polynomial in
`n` (`Cost`), kept as its coefficients.

At admission a rule's cost is evaluated at `n` = ADMISSION_SIZE, a plan of a thousand
changes (or a list of a thousand tags): above EVALUATION_LIMIT the rule is refused as too
costly, naming the comprehension that makes it so. At judgement the same polynomial is
evaluated at the input's own `n` (at most ITERATION_BUDGET: cel-cpp stops an evaluation
there) and counted against the plan's budget (judge.py).

Not weighed: equality and the string functions, which are linear in the values they
read; the plan's size bounds those values, and cel-cpp's iteration budget how often
one evaluation can read them."""

from __future__ import annotations

from dataclasses import dataclass

from controller.policy.checked_ast import Node

# cel-cpp stops an evaluation after this many comprehension iterations in all (its
# RuntimeOptions default, which cel-expr-python does not let us change).
ITERATION_BUDGET = 9_999
# The size a rule is costed at when it is admitted: a large plan's number of changes.
ADMISSION_SIZE = 1_000
# The most a rule may cost there: quadratic with a small factor (a filter, or one
# comprehension inside another with a short loop), never cubic.
EVALUATION_LIMIT = 10_000_000
# Membership scans its container: one step per element, unless the container is a list
# literal (its size is in the expression) or a resource change's `change.actions`
# (OpenTofu writes at most two actions).
MEMBERSHIP = "@in"
SMALL_FIELDS = frozenset({"actions"})


@dataclass(frozen=True)
class Cost:
    """A polynomial in n: coefficients[i] is the factor of n**i."""

    coefficients: tuple[int, ...] = (0,)

    def __add__(self, other: Cost) -> Cost:
        size = max(len(self.coefficients), len(other.coefficients))
        mine = self.coefficients + (0,) * (size - len(self.coefficients))
        theirs = other.coefficients + (0,) * (size - len(other.coefficients))
        return Cost(tuple(a + b for a, b in zip(mine, theirs, strict=True)))

    def times_n(self) -> Cost:
        return Cost((0, *self.coefficients))

    @property
    def degree(self) -> int:
        nonzero = [i for i, c in enumerate(self.coefficients) if c]
        return max(nonzero, default=0)

    def at(self, n: int) -> int:
        return sum(c * n**i for i, c in enumerate(self.coefficients))


ONE = Cost((1,))
PER_ELEMENT = Cost((0, 1))


def cost_of(node: Node) -> Cost:
    """The node's cost polynomial (see the module's docstring)."""
    if node.kind == "comprehension":
        total = ONE
        for index, child in enumerate(node.children):
            part = cost_of(child)
            if index in node.loop_indexes and _appends(child, node.accumulator):
                part = part + PER_ELEMENT  # the copy of the list built so far
            total = total + (part.times_n() if index in node.loop_indexes else part)
        return total
    total = ONE + (PER_ELEMENT if _scans(node) else Cost())
    for child in node.children:
        total = total + cost_of(child)
    return total


def _appends(node: Node, accumulator: str) -> bool:
    """The loop step adds to the accumulator (`@result + [x]`), outside any comprehension
    of its own."""
    stack = [node]
    while stack:
        current = stack.pop()
        adds = current.kind == "call" and current.name == "_+_"
        if adds and any(c.kind == "ident" and c.name == accumulator for c in current.children):
            return True
        if current.kind != "comprehension":
            stack.extend(current.children)
    return False


def _scans(node: Node) -> bool:
    """A membership test over a container of unknown size."""
    if node.kind != "call" or node.name != MEMBERSHIP or len(node.children) != 2:
        return False
    container = node.children[1]
    literal = container.kind == "list"
    return not literal and not (container.kind == "select" and container.name in SMALL_FIELDS)


def costliest(node: Node) -> Node:
    """The innermost comprehension of the deepest nest (the first of equals), or `node`
    itself when it holds none: where a refusal for cost points."""
    best, best_depth = node, 0
    stack = [(node, 0)]
    while stack:
        current, depth = stack.pop()
        if current.kind == "comprehension":
            depth += 1
            if depth > best_depth:
                best, best_depth = current, depth
        stack.extend((child, depth) for child in reversed(current.children))
    return best
