"""Imported at start-up by every Python process whose PYTHONPATH holds this folder: the interrupt
test's ``fedpne reproduce`` and the workers it spawns.  With FEDPNE_TEST_HOLD naming a file, the
first index of a sweep that lists a chunk creates that file, and from then on a process about to
write a chunk waits there until a signal stops it.  So the command cannot finish before the test's
signal, however quickly its programs load, and a signal always finds it mid-study (not between its
last chunk and its exit, as a fixed wait or a poll from a busy machine could).  SIGUSR1 makes such
a process print its threads' stacks."""
import json
import os
import sys
import time

_HOLD = os.environ.get("FEDPNE_TEST_HOLD", "")
# fedpne_jax.experiments.store's INDEX_FILE and CHUNKS folder, copied: importing the package here
# would load NumPy and JAX into every process at its start.
_INDEX = os.sep + "index.json"
_CHUNKS = os.sep + "chunks" + os.sep


def _hold(event, args):
    # Every file of a sweep is written to a temporary file and renamed (os.replace raises "os.rename").
    if event != "os.rename":
        return
    source, target = os.fsdecode(args[0]), os.fsdecode(args[1])
    if target.endswith(_INDEX):
        try:
            with open(source, "rb") as fh:
                listed = json.load(fh).get("chunks")
        except (OSError, ValueError, AttributeError):
            return
        if listed:
            try:
                os.close(os.open(_HOLD, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
    elif _CHUNKS in target and os.path.exists(_HOLD):
        while True:
            time.sleep(1)


if _HOLD:
    sys.addaudithook(_hold)
    # SIGUSR1 prints every thread's stack to standard error: the test asks a command that did not
    # stop where it is.
    import faulthandler
    import signal
    faulthandler.register(signal.SIGUSR1, all_threads=True)
