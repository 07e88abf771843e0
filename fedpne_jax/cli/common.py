"""What every command shares: the help formatter, the exit statuses, the options several commands take,
the checks of an output path before anything runs, the message of an OS error, the deferral of
Ctrl-C while a result is written, and the import of --plugin modules.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import stat
import sys

from fedpne_jax.core import registry, sharding
from fedpne_jax.core.files import WriteError
from fedpne_jax.core.run import memory_budget

# Exit statuses: 0 done; 2 refused input, or an output that could not be written (a message on
# stderr says which and where); 130 interrupted by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


class Defaults(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows an option's default unless it is None ("not given"), whose meaning its help states; the
    description and examples keep their line breaks."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """Refuses a bad command line in one line, naming the option, instead of argparse's usage block
    (which buries the one line that matters under every option of the command)."""

    def error(self, message):
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


def whole_number(text: str) -> int:
    """A count given as 10000, 10_000 or 1e4 (an exact whole number in any of Python's spellings)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(value)


def memory_gb(text: str) -> float:
    """--memory-gb, checked when the command line is read (by core.run.memory_budget's rule)."""
    try:
        value = float(text)
        memory_budget(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of GiB per device in (0, 2^30], got {text!r}") from None
    return value


def results_argument(p):
    """The run results and sweep folders that plot, report and export read."""
    p.add_argument("results", nargs="+", metavar="RESULTS", help="'fedpne run --output' files or sweep folders")


def plugin_option(p):
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import MODULE (a dotted name or a .py file) first, which registers algorithms or "
                        "objectives (repeatable)")


def device_options(p):
    p.add_argument("--devices", default="all",
                   help="shard the runs over all visible devices or the first N (results do not depend on it)")
    g = p.add_argument_group("multi-host (jax.distributed.initialize; run the same command in every process)")
    g.add_argument("--distributed", action="store_true",
                   help="call jax.distributed.initialize() first (arguments below, or detected from SLURM/MPI)")
    g.add_argument("--coordinator", default=None, help="HOST:PORT of process 0")
    g.add_argument("--num-processes", type=whole_number, default=None, help="how many processes take part")
    g.add_argument("--process-id", type=whole_number, default=None, help="this process's index, 0 .. num-processes - 1")


def devices(spec: str):
    return sharding.select_devices(spec)


def load_plugins(argv) -> None:
    """Import every --plugin module before the parser is built, so that its algorithms and objectives
    are named in the help and accepted like built-in ones."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--plugin", action="append", default=[])
    known, _ = pre.parse_known_args(argv)
    for module in known.plugin:
        registry.load_plugin(module)


def check_output_file(option: str, path: str, inputs=(), stream: bool = True) -> None:
    """An output file's path is checked before anything runs: a run must not finish only to fail
    writing its output.  (A write can still fail later, e.g. on a full disk; see keep_result.)
    ``inputs``: the files and folders the command reads, which it must not write over (nor into a
    folder of them: a sweep's own files).  ``stream``: "-" is standard output and a FIFO is written
    as a stream; False for a figure, which its writer seeks in."""
    if not path:
        raise ValueError(f"{option}: the path is empty")
    if path == "-":
        if not stream:
            raise ValueError(f"{option}: '-' (standard output) is not an output of this command; give a file name")
        return
    if os.path.isdir(path) or path.endswith(os.sep):  # "x.json/" names a folder, not the file x.json
        raise ValueError(f"{option}: {path!r} is a folder; give a file name")
    target = os.path.realpath(path)                   # a symlink's target is what gets written
    for given in inputs:
        source = os.path.realpath(given)
        if target == source or (os.path.isdir(source) and target.startswith(source.rstrip(os.sep) + os.sep)):
            where = "is" if target == source else "is inside"
            raise ValueError(f"{option}: {path!r} {where} the input {given!r}, which writing it would overwrite; "
                             f"give another path")
    if os.path.exists(target) and not os.path.isfile(target):
        if not stream and stat.S_ISFIFO(os.stat(target).st_mode):
            raise ValueError(f"{option}: {path!r} is a FIFO; a figure is written to a file")
        # A device or FIFO is written in place: only its own permission matters.
        if not os.access(target, os.W_OK):
            raise ValueError(f"{option}: {path!r} is not writable")
        return
    folder = os.path.dirname(target)
    if not os.path.exists(folder):
        raise ValueError(f"{option}: the folder of {path!r} does not exist")
    if not os.path.isdir(folder):
        raise ValueError(f"{option}: the folder of {path!r} is a file")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{option}: the folder of {path!r} is not writable")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise ValueError(f"{option}: {path!r} is read-only")


def check_output_folder(option: str, path: str) -> None:
    """An output folder (created if missing) is checked before anything runs, like an output file."""
    if not path:
        raise ValueError(f"{option}: the path is empty")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{option}: {path!r} is a file, not a folder")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):          # the folders that will be created need a writable parent
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"{option}: {path!r} cannot be created: {existing!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{option}: {path!r} is not writable" if existing == os.path.abspath(path)
                         else f"{option}: {path!r} cannot be created: {existing!r} is not writable")


def describe_os_error(err: OSError, where: str | None = None) -> str:
    """An OSError as one line naming the path: its own file name, else ``where`` (a write to an open
    file, e.g. on a full disk, raises without one)."""
    cause = err.__cause__
    if isinstance(err, WriteError) and isinstance(cause, OSError):
        # The atomic writer's error: report the system's reason, not its sentence around it.
        err, where = cause, where if cause.filename else None
    what = err.strerror or str(err) or type(err).__name__
    names = [n for n in (err.filename, err.filename2) if n is not None]
    if names:
        return f"{what}: {', '.join(map(repr, names))}"
    return f"{what} (writing {where!r})" if where else what


def describe_params(algorithm) -> str:
    """The parameters of ``algorithm``'s config with their defaults: what ``--set KEY=VALUE`` takes."""
    lines = [f"parameters of {algorithm.name!r} (set with --set KEY=VALUE, or the options of the same name):"]
    for f in dataclasses.fields(algorithm.config_type):
        default = f.default if f.default is not dataclasses.MISSING else "(required)"
        lines.append(f"  {f.name:<16} {default!r}")
    doc = (algorithm.config_type.__doc__ or "").strip()
    return "\n".join(lines + ([f"\n{doc}"] if doc else []))


class _Deferred:
    count = 0


@contextlib.contextmanager
def deferred_interrupts():
    """SIGINT counted, not raised, inside the block (the result being written); the caller reads
    ``count`` after it.  Outside the main thread no handler can be set and nothing changes."""
    deferred = _Deferred()

    def on_interrupt(signum, frame):
        deferred.count += 1
        print("fedpne: interrupted; the result is being written first", file=sys.stderr, flush=True)

    try:
        previous = signal.signal(signal.SIGINT, on_interrupt)
    except ValueError:
        previous = None
    try:
        yield deferred
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
