"""``python -m fedpne_jax.flower.supernode [flower-supernode options]``: Flower's SuperNode with a
shorter idle poll, and each message answered by its own reply (:func:`answer_each_message`).

It runs ``flower-supernode`` unchanged except for that and that its idle waits last at most
``FEDPNE_FLOWER_NODE_POLL`` seconds (default 0.1; 0 or "off" keeps Flower's own), lengthening with
the time since the last message.  ``fedpne flower local`` starts its SuperNodes this way.
:func:`quicker_pulls` (also called by the ServerApp and the warm ClientApp executor) shortens
Flower's waits for a message's contents.

Flower's waits and why they are shortened: docs/guides/flower.md, section "Inside the apps".
"""
from __future__ import annotations

import os
import sys
import time as _time
import types

IDLE = 3.0          # Flower's wait after an ask that brought no message
LONGEST_IDLE = 0.5


class _Time(types.ModuleType):
    """The ``time`` module, with ``sleep`` capped (a module itself: it replaces one)."""

    def __init__(self, cap: float):
        super().__init__(_time.__name__, _time.__doc__)
        self._cap = cap
        self.last_message = _time.time()

    def sleep(self, seconds: float) -> None:
        cap = self._cap
        if seconds >= IDLE:
            cap = max(cap, min(LONGEST_IDLE, cap + 0.05 * (_time.time() - self.last_message)))
        _time.sleep(min(seconds, cap))

    def __getattr__(self, name):
        return getattr(_time, name)


def _note_messages(module, clock: _Time) -> None:
    pull = module._pull_and_store_message

    def pull_and_note(*args, **kwargs):
        run_id = pull(*args, **kwargs)
        if run_id is not None:
            clock.last_message = _time.time()
        return run_id
    module._pull_and_store_message = pull_and_note


def answer_each_message(module) -> None:
    """Make the SuperNode's loop (``module``: Flower's ``start_client_internal``) push replies after
    each message it pulls until that message's own reply is among them.

    Flower 1.42 pushes until it has pushed a reply, any one.  A message whose run stops while the
    SuperNode takes it in (a RunNotRunningException after its task was created) is given up by the
    SuperNode but can still be answered by the executor that took its task.  That stale reply then
    stood in for the next message's, whose own reply waited for yet another message: the next run's
    hello went unanswered for good.  A message given up is also forgotten (:func:`forget`)."""
    pull, push = module._pull_and_store_message, module._push_messages
    current: dict = {}

    def pull_and_note(*args, receive, state, object_store, **kwargs):
        got: list = []

        def receive_and_note(*a, **k):
            got[:] = [receive(*a, **k)]
            current["id"] = None if got[0] is None else got[0][0].metadata.message_id
            return got[0]
        run_id = pull(*args, receive=receive_and_note, state=state, object_store=object_store, **kwargs)
        if run_id is None and got and got[0] is not None:
            forget(got[0][0], state, object_store)
        return run_id

    def push_until_answered(*args, send, **kwargs):
        answered: set = set()

        def send_and_note(message, *a, **k):
            answered.add(message.metadata.reply_to_message_id)
            return send(message, *a, **k)
        while True:
            push(*args, send=send_and_note, **kwargs)
            if current.get("id") is None or current["id"] in answered:
                return
    module._pull_and_store_message, module._push_messages = pull_and_note, push_until_answered


def forget(message, state, object_store) -> None:
    """Delete a message the SuperNode pulled and then gave up, with its contents, and finish its run's
    unfinished tasks.  Flower 1.42 leaves them when the run stops as the message comes in: the
    executor that took the task asked for contents that never came until its pull's time limit
    (fedpne_jax.flower.warm), or answered it with a reply no one waited for."""
    from flwr.common.constant import Status, SubStatus
    state.delete_messages(message_ids=[message.metadata.message_id])
    object_store.delete(message.metadata.message_id)
    unfinished = (Status.PENDING, Status.STARTING, Status.RUNNING)
    for task in state.get_tasks(run_ids=[message.metadata.run_id], statuses=unfinished):
        state.finish_task(task.task_id, sub_status=SubStatus.STOPPED, details="its run was stopped")


def cap_pulls(**caps: float) -> None:
    """Lower the defaults of Flower's pulls of a message's contents (``pull_objects`` and
    ``pull_and_inflate_object_from_tree``, keyword ``name=seconds``) to at most these, in this
    process; a default of None (no limit) becomes the cap."""
    from flwr.supercore.inflatable import inflatable_utils
    for function in (inflatable_utils.pull_objects, inflatable_utils.pull_and_inflate_object_from_tree):
        defaults = function.__kwdefaults__ or {}
        for name, cap in caps.items():
            if name in defaults:
                defaults[name] = cap if defaults[name] is None else min(float(defaults[name]), cap)


def quicker_pulls(first: float = 0.02) -> None:
    """Flower's first wait for a message content not yet pushed: ``first`` s instead of 1 s (doubling
    to Flower's cap as before; its limits on tries and time unchanged).  Unless
    FEDPNE_FLOWER_NODE_POLL is 0 or "off"."""
    if os.environ.get("FEDPNE_FLOWER_NODE_POLL", "").strip().lower() in ("0", "off"):
        return
    cap_pulls(initial_backoff=first)


def main() -> None:
    from flwr.supernode import start_client_internal
    from flwr.supernode.cli import flower_supernode
    raw = os.environ.get("FEDPNE_FLOWER_NODE_POLL", "0.1").strip().lower()
    answer_each_message(start_client_internal)
    if raw not in ("0", "off", ""):
        clock = _Time(float(raw))
        start_client_internal.time = clock
        _note_messages(start_client_internal, clock)
    quicker_pulls()
    sys.argv[0] = "flower-supernode"
    flower_supernode()


if __name__ == "__main__":
    main()
