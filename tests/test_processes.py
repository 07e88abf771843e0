"""fedpne_jax.core.processes, with real processes: a tree whose root ignores SIGTERM is stopped whole
(SIGKILL after the grace period), a child ends itself once its parent is killed outright, and one
watching two parents once both have exited."""
import signal
import subprocess
import sys
import textwrap
import time

from fedpne_jax.core.processes import alive, descendants, stop_processes


def _wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


# Two children that die of SIGTERM, then the root ignores it (ignored signals are inherited).
ROOT = textwrap.dedent("""
    import signal, subprocess, time
    children = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(60)
""")


def test_a_tree_whose_root_ignores_sigterm_is_killed_after_the_grace_period():
    root = subprocess.Popen([sys.executable, "-c", ROOT], stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout.readline() == "ready\n"
        tree = descendants([root.pid])
        assert len(tree) == 3, tree
        started = time.monotonic()
        stop_processes([root.pid], 0.5)
        took = time.monotonic() - started
        # the children die of the SIGTERM, the root only of the SIGKILL that follows the grace period
        assert 0.5 <= took < 5, took
        assert root.wait(timeout=5) == -signal.SIGKILL
        assert not any(alive(pid) for pid in tree)
    finally:
        if root.poll() is None:
            root.kill()
            root.wait()
        root.stdout.close()


def test_a_stopped_process_that_exits_at_once_returns_before_the_grace_period():
    child = subprocess.Popen(["sleep", "60"])
    started = time.monotonic()
    stop_processes([child.pid], 30.0)
    assert time.monotonic() - started < 5           # exited, though not yet reaped (a zombie)
    assert child.wait(timeout=5) == -signal.SIGTERM
    assert not alive(child.pid)


CHILD = textwrap.dedent("""
    import os, subprocess, sys, time
    grandchild = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())])
    print(grandchild.pid, flush=True)
    time.sleep(60)
""")
# The parent's pid from its command line, as a spawned worker has it: a parent killed while the child
# was still starting (importing the package) is then gone already.
GRANDCHILD = textwrap.dedent("""
    import sys, time
    from fedpne_jax.core.processes import exit_when_gone
    exit_when_gone([int(sys.argv[1])], 3, 0.05)
    print("watching", flush=True)
    time.sleep(60)
""")


def test_a_child_exits_once_its_parent_is_killed_outright():
    middle = subprocess.Popen([sys.executable, "-c", CHILD, GRANDCHILD], stdout=subprocess.PIPE, text=True)
    grandchild = int(middle.stdout.readline())
    try:
        assert middle.stdout.readline() == "watching\n"
        time.sleep(0.2)
        assert alive(grandchild)                     # its parent lives: it goes on
        middle.kill()
        middle.wait()
        assert _wait_for(lambda: not alive(grandchild), 10), "the child outlived its killed parent by 10 s"
    finally:
        stop_processes([middle.pid, grandchild], 1.0)
        middle.stdout.close()


WATCHER = textwrap.dedent("""
    import sys, time
    from fedpne_jax.core.processes import exit_when_gone
    exit_when_gone([int(pid) for pid in sys.argv[1:]], 7, 0.02)
    print("watching", flush=True)
    time.sleep(60)
""")


def test_exit_when_gone_waits_for_every_parent():
    first, second = subprocess.Popen(["sleep", "60"]), subprocess.Popen(["sleep", "60"])
    watcher = subprocess.Popen([sys.executable, "-c", WATCHER, str(first.pid), str(second.pid)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout.readline() == "watching\n"
        first.kill()
        first.wait()
        time.sleep(0.3)
        assert watcher.poll() is None                 # the second still runs
        second.kill()
        second.wait()
        assert watcher.wait(timeout=10) == 7
    finally:
        stop_processes([p.pid for p in (first, second, watcher) if p.poll() is None], 1.0)
        for p in (first, second, watcher):
            p.wait()
        watcher.stdout.close()
