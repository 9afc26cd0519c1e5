"""Depth-first admission: a worker whose activity slots are taken finishes the
executions it has in flight before it starts new ones.

Without it, a burst of starts is taken breadth-first: every new execution's
first pass runs at once and queues its first activity behind all the others,
so each execution finishes near the end of the burst. With it, the workflow
task loop leases first passes of new executions only

* while no activity loop of the worker has a backlog (an activity of an
  execution in flight was left in the queue because its loop had no free
  slot; the backlog ends when that loop's dequeue finds nothing more), and
* no more at once than the activity slots that are open::

      room = open slots of all activity loops - passes running

With no room it still leases the tasks of executions in flight (timers,
signals, completions recorded by other workers): those never wait behind new
starts. When room opens (a slot frees, a backlog drains) while first passes
were held, the task loop is poked so admission resumes at once rather than at
its next poll. One saturated activity kind does not stop new executions
while other loops have open slots; its backlog does, until it drains.
"""

from __future__ import annotations

from collections.abc import Sequence

from azync_flow.worker import LeaseLoop

__all__ = ["DepthFirstAdmission"]


class DepthFirstAdmission:
    """Decides how many first passes the workflow task loop may lease now.

    Args:
        task_loop: the worker's workflow task loop (its running passes count
            against the room, and it is poked when room opens).
        activity_loops: the worker's activity loops; none means no limit (the
            activities run on other workers).
    """

    def __init__(self, task_loop: LeaseLoop, activity_loops: Sequence[LeaseLoop]) -> None:
        self.task_loop = task_loop
        self.activity_loops = list(activity_loops)
        #: True while first passes are held back for want of room.
        self.held = False
        for loop in self.activity_loops:
            loop.spare_listeners.append(self._room_may_open)

    def room(self) -> int | None:
        """First passes that may start now (>= 0), or None for no limit."""
        if not self.activity_loops:
            return None
        if any(loop.backlog for loop in self.activity_loops):
            return 0
        slots = sum(loop.open_slots() for loop in self.activity_loops)
        return max(0, slots - len(self.task_loop.in_flight))

    def lease_plan(self, limit: int) -> tuple[int, bool]:
        """How a lease of up to ``limit`` workflow tasks should go.

        Returns:
            ``(limit, first_passes)``: the tasks to lease and whether first
            passes of new executions may be among them (after every task of an
            execution in flight).
        """
        room = self.room()
        if room is None:
            return limit, True
        self.held = room == 0
        if room == 0:
            return limit, False
        return min(limit, room), True

    def _room_may_open(self) -> None:
        if self.held and (self.room() or 0) > 0:
            self.held = False
            self.task_loop.poke()
