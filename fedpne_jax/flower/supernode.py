"""``python -m fedpne_jax.flower.supernode [flower-supernode options]``: Flower's SuperNode with a
shorter idle poll, and each message answered by its own reply (:func:`answer_each_message`).

It runs ``flower-supernode`` unchanged except for that and that its idle waits last at most
``FEDPNE_FLOWER_NODE_POLL`` seconds (default 0.1), lengthening with the time since the last
message, and its waits for its own state (a reply, a message's contents) at most LOCAL_WAIT; 0 (in
any spelling: "0.0", "0e0") or "off" keeps all of Flower's own waits, and any other value that is not a
number of seconds above 0 is refused (exit status 2) before Flower starts.  ``fedpne flower local`` starts its SuperNodes this way.
:func:`quicker_pulls` (also called by the ServerApp and the warm ClientApp executor) shortens
Flower's waits for a message's contents.

Flower's waits and why they are shortened: docs/guides/flower.md, section "Inside the apps".
"""
from __future__ import annotations

import math
import os
import sys
import time as _time
import types

IDLE = 3.0          # Flower's wait after an ask that brought no message
LONGEST_IDLE = 0.5
# Flower's shorter waits (0.5 s) are for what the SuperNode holds itself (an executor's reply, a
# message's contents in its object store): each look is a read of its own state, not a request.
LOCAL_WAIT = 0.01
NODE_POLL = "FEDPNE_FLOWER_NODE_POLL"
DEFAULT_NODE_POLL = 0.1


def node_poll(raw: str | None = None) -> float | None:
    """FEDPNE_FLOWER_NODE_POLL (or ``raw``) in seconds, or None where Flower's own waits are kept:
    "off" or any spelling of 0.  Unset or empty: the default.  ValueError, naming the variable, for
    anything else that is not a finite number of seconds: a 0 read as a cap of 0 s would make every
    wait a busy loop."""
    text = os.environ.get(NODE_POLL, "") if raw is None else raw
    text = text.strip().lower()
    if text == "":
        return DEFAULT_NODE_POLL
    if text == "off":
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{NODE_POLL} must be a number of seconds (0 or more) or 'off', not {text!r}")
    return seconds or None


class _Time(types.ModuleType):
    """The ``time`` module, with ``sleep`` capped (a module itself: it replaces one)."""

    def __init__(self, cap: float):
        super().__init__(_time.__name__, _time.__doc__)
        self._cap = cap
        self.last_message = _time.time()

    def sleep(self, seconds: float) -> None:
        if seconds >= IDLE:
            cap = max(self._cap, min(LONGEST_IDLE, self._cap + 0.05 * (_time.time() - self.last_message)))
        else:
            cap = min(self._cap, LOCAL_WAIT)
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


class _NoReplyComing(Exception):
    """The message's task has finished without a reply."""


class _State:
    """A SuperNode's NodeState that notes the task it creates (``created``) and, with ``watch`` set to
    a task id, raises _NoReplyComing where its loop would wait for a reply that task can no longer
    give.  The check comes before the fetch: an executor stores its reply before it finishes its task."""

    def __init__(self, state, watch=None):
        self._state, self._watch, self.created = state, watch, None

    def create_task(self, *args, **kwargs):
        self.created = self._state.create_task(*args, **kwargs)
        return self.created

    def get_messages_legacy(self, **kwargs):
        over = self._watch is not None and kwargs.get("is_reply") and finished(self._state, self._watch)
        got = self._state.get_messages_legacy(**kwargs)
        if over and not got:
            raise _NoReplyComing
        return got

    def __getattr__(self, name):
        return getattr(self._state, name)


def finished(state, task_id: int) -> bool:
    from flwr.common.constant import Status
    return any(task.status.status == Status.FINISHED for task in state.get_tasks(task_ids=[task_id]))


def answer_each_message(module) -> None:
    """Make the SuperNode's loop (``module``: Flower's ``start_client_internal``) push replies after
    each message it pulls until that message's own reply is among them, or its task has finished
    without one.

    Flower 1.42 pushes until it has pushed a reply, any one.  A message whose run stops while the
    SuperNode takes it in (a RunNotRunningException after its task was created) is given up by the
    SuperNode but can still be answered by the executor that took its task.  That stale reply then
    stood in for the next message's, whose own reply waited for yet another message: the next run's
    hello went unanswered for good.  A message given up is also forgotten (:func:`forget`)."""
    pull, push = module._pull_and_store_message, module._push_messages
    current: dict = {}

    def pull_and_note(*args, receive, state, object_store, **kwargs):
        got: list = []
        noting = _State(state)

        def receive_and_note(*a, **k):
            got[:] = [receive(*a, **k)]
            return got[0]
        run_id = pull(*args, receive=receive_and_note, state=noting, object_store=object_store, **kwargs)
        message = got[0][0] if got and got[0] is not None else None
        current.update(id=None if run_id is None or message is None else message.metadata.message_id,
                       task=noting.created)
        # Flower's other ways of returning no run (contents that failed to arrive, a task id that
        # collided) finish the task or create none themselves.
        if run_id is None and message is not None and noting.created is not None \
                and not finished(state, noting.created):
            forget(message, noting.created, state, object_store)
        return run_id

    def push_until_answered(*args, send, state, **kwargs):
        answered: set = set()

        def send_and_note(message, *a, **k):
            answered.add(message.metadata.reply_to_message_id)
            return send(message, *a, **k)
        watching = _State(state, watch=current.get("task"))
        while True:
            try:
                push(*args, send=send_and_note, state=watching, **kwargs)
            except _NoReplyComing:
                return
            if current.get("id") is None or current["id"] in answered or current.get("task") is None:
                return
    module._pull_and_store_message, module._push_messages = pull_and_note, push_until_answered


def forget(message, task_id: int, state, object_store) -> None:
    """Delete a message the SuperNode pulled and then gave up, with its contents, and finish its task.
    Flower 1.42 leaves them when the run stops as the message comes in: the executor that took the
    task asked for contents that never came until its pull's time limit (fedpne_jax.flower.warm), or
    answered it with a reply no one waited for."""
    from flwr.common.constant import SubStatus
    state.delete_messages(message_ids=[message.metadata.message_id])
    object_store.delete(message.metadata.message_id)
    state.finish_task(task_id, sub_status=SubStatus.STOPPED, details="its run was stopped")


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
    FEDPNE_FLOWER_NODE_POLL is 0 or "off" (:func:`node_poll`)."""
    if node_poll() is None:
        return
    cap_pulls(initial_backoff=first)


def main() -> None:
    try:
        poll = node_poll()
    except ValueError as err:
        print(f"fedpne: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    from flwr.supernode import start_client_internal
    from flwr.supernode.cli import flower_supernode
    answer_each_message(start_client_internal)
    if poll is not None:
        clock = _Time(poll)
        start_client_internal.time = clock
        _note_messages(start_client_internal, clock)
    quicker_pulls()
    sys.argv[0] = "flower-supernode"
    flower_supernode()


if __name__ == "__main__":
    main()
