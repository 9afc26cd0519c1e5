"""The graph of one DAG run, laid out for an inline SVG: tasks in columns by
their depth (the longest chain of dependencies before them), edges from each
dependency to its dependent, and the compensation chain below in the order
it ran (``comp:<key>`` tasks, chained newest completion first).

Pure: it takes the run's tasks and edges and returns boxes and paths with
coordinates; the template draws them, escaping every label.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

__all__ = ["Edge", "Graph", "Node", "TaskInfo", "lay_out_dag"]

NODE_W = 170
NODE_H = 36
COL = 220
ROW = 52
PAD = 16
COMP_PREFIX = "comp:"


@dataclass(frozen=True)
class TaskInfo:
    """What the graph needs of one task job."""

    key: str
    kind: str
    state: str
    attempt: int
    last_error: str
    completed_at: datetime | None


@dataclass(frozen=True)
class Node:
    x: int
    y: int
    key: str
    state: str
    title: str
    order: int = 0  # a compensation's place in the order it ran (1 = first); 0 otherwise


@dataclass(frozen=True)
class Edge:
    path: str
    compensation: bool = False


@dataclass
class Graph:
    width: int
    height: int
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    compensation_y: int | None = None


def _depths(keys: list[str], deps: dict[str, list[str]]) -> dict[str, int]:
    """Longest-path depth of each key (edges to unknown keys ignored; a cycle,
    which the builder refuses, would stop at the keys already placed)."""
    depth: dict[str, int] = {}
    visiting: set[str] = set()

    def visit(k: str) -> int:
        if k in depth:
            return depth[k]
        if k in visiting:
            return 0
        visiting.add(k)
        ups = [visit(u) + 1 for u in deps.get(k, []) if u in deps or u in keys]
        visiting.discard(k)
        depth[k] = max(ups, default=0)
        return depth[k]

    for k in keys:
        visit(k)
    return depth


def _title(t: TaskInfo) -> str:
    error = f" — {t.last_error}" if t.last_error else ""
    return f"{t.key} ({t.kind}): {t.state}, attempt {t.attempt}{error}"


def _path(x1: int, y1: int, x2: int, y2: int) -> str:
    mid = (x1 + x2) // 2
    return f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"


def compensation_order(tasks: list[TaskInfo], deps: list[tuple[str, str]]) -> list[TaskInfo]:
    """The ``comp:`` tasks in the order they ran: along their chain (each
    waits for the one before), the chain's head first."""
    comps = {t.key: t for t in tasks if t.key.startswith(COMP_PREFIX)}
    after = {k: d for k, d in deps if k in comps and d in comps}
    heads = [k for k in comps if k not in after]
    nxt = {d: k for k, d in after.items()}
    out: list[TaskInfo] = []
    for head in sorted(heads, key=lambda k: (comps[k].completed_at is None, k)):
        k: str | None = head
        while k is not None and k in comps and comps[k] not in out:
            out.append(comps[k])
            k = nxt.get(k)
    out += [t for t in comps.values() if t not in out]
    return out


def lay_out_dag(tasks: list[TaskInfo], deps: list[tuple[str, str]]) -> Graph:
    """Lay out a run's graph.

    Args:
        tasks: every task job of the run (compensations included).
        deps: ``(task_key, depends_on_key)`` edges.

    Returns:
        The :class:`Graph`: static tasks in depth columns, compensations in a
        row below, numbered in the order they ran.
    """
    static = [t for t in tasks if not t.key.startswith(COMP_PREFIX)]
    keys = [t.key for t in static]
    ups: dict[str, list[str]] = {k: [] for k in keys}
    for k, d in deps:
        if k in ups and d in ups:
            ups[k].append(d)
    depth = _depths(keys, ups)
    columns: dict[int, list[TaskInfo]] = {}
    for t in static:
        columns.setdefault(depth[t.key], []).append(t)
    at: dict[str, tuple[int, int]] = {}
    g = Graph(width=0, height=0)
    for col, members in sorted(columns.items()):
        for row, t in enumerate(sorted(members, key=lambda t: t.key)):
            x, y = PAD + col * COL, PAD + row * ROW
            at[t.key] = (x, y)
            g.nodes.append(Node(x, y, t.key, t.state, _title(t)))
    for k, d in deps:
        if k in at and d in at:
            (x1, y1), (x2, y2) = at[d], at[k]
            g.edges.append(Edge(_path(x1 + NODE_W, y1 + NODE_H // 2, x2, y2 + NODE_H // 2)))
    rows = max((len(m) for m in columns.values()), default=0)
    g.width = PAD * 2 + max(len(columns), 1) * COL
    g.height = PAD * 2 + rows * ROW
    comps = compensation_order(tasks, deps)
    if comps:
        g.compensation_y = g.height + 14
        y = g.compensation_y + 10
        for i, t in enumerate(comps):
            x = PAD + i * COL
            g.nodes.append(Node(x, y, t.key, t.state, _title(t), order=i + 1))
            if i:
                g.edges.append(Edge(_path(x - COL + NODE_W, y + NODE_H // 2, x, y + NODE_H // 2),
                                    compensation=True))  # fmt: skip
        g.width = max(g.width, PAD * 2 + len(comps) * COL)
        g.height = y + NODE_H + PAD
    return g
