"""``python -m fedpne_jax.flower.supernode [flower-supernode options]``: Flower's SuperNode with a
shorter idle poll.

Flower 1.42's SuperNode asks the SuperLink for a message every 3 s while it has none, and checks
for its ClientApp's reply every 0.5 s: with Fed-PNE's one message per client per step, those waits
are most of a step on localhost.  This runs ``flower-supernode`` unchanged except that those sleeps
last at most ``FEDPNE_FLOWER_NODE_POLL`` seconds (default 0.1; 0 or "off" keeps Flower's own),
and the idle poll lengthens by 1/20 of the time since the last message, up to 0.5 s: each ask costs
the SuperLink CPU (some 7 ms on a loaded 2-core machine), which many idle SuperNodes would otherwise
take from the run.
``fedpne flower local`` starts its SuperNodes this way; by hand, ``flower-supernode`` works the same,
with Flower's waits.

:func:`quicker_pulls` (also called by the ServerApp and the warm ClientApp executor): a message's
contents are pulled as soon as its header arrives, often before the sender has pushed them, and
Flower then waits 1 s, then 2 s, before asking again; on localhost they come a few ms later.
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


def quicker_pulls(first: float = 0.02) -> None:
    """Flower's first wait for a message content not yet pushed: ``first`` s instead of 1 s (doubling
    to Flower's cap as before; its limits on tries and time unchanged).  Unless
    FEDPNE_FLOWER_NODE_POLL is 0 or "off"."""
    if os.environ.get("FEDPNE_FLOWER_NODE_POLL", "").strip().lower() in ("0", "off"):
        return
    from flwr.supercore.inflatable import inflatable_utils
    for function in (inflatable_utils.pull_objects, inflatable_utils.pull_and_inflate_object_from_tree):
        defaults = function.__kwdefaults__
        if defaults is not None and "initial_backoff" in defaults:
            defaults["initial_backoff"] = min(float(defaults["initial_backoff"]), first)


def main() -> None:
    from flwr.supernode import start_client_internal
    from flwr.supernode.cli import flower_supernode
    raw = os.environ.get("FEDPNE_FLOWER_NODE_POLL", "0.1").strip().lower()
    if raw not in ("0", "off", ""):
        clock = _Time(float(raw))
        start_client_internal.time = clock
        _note_messages(start_client_internal, clock)
    quicker_pulls()
    sys.argv[0] = "flower-supernode"
    flower_supernode()


if __name__ == "__main__":
    main()
