"""Command line: ``fedpne run``, ``sweep``, ``reproduce``, ``plot``, ``report``, ``export`` and ``flower``
(also ``python -m fedpne_jax ...``).

A command is one module of this package: its ``NAME``, its ``INTERRUPTED`` message (what Ctrl-C
leaves behind), ``add_parser(sub)`` and ``command(args) -> exit status``; :data:`COMMANDS` lists
them in the order of the help.  What they share is in :mod:`fedpne_jax.cli.common`.
"""
from __future__ import annotations

import argparse
import atexit
import os
import re
import sys
import warnings

from fedpne_jax.cli import common, export, flower, plot, report, reproduce, run, sweep
from fedpne_jax.cli.common import EXIT_ERROR, EXIT_INTERRUPTED, describe_os_error, load_plugins
from fedpne_jax.core import compile_cache, host_devices, registry, sharding
from fedpne_jax.core.errors import CapacityError, MissingExtra, ObjectiveError
from fedpne_jax.experiments import workers

COMMANDS = {module.NAME: module for module in (run, sweep, reproduce, plot, report, export, flower)}


def build_parser() -> argparse.ArgumentParser:
    parser = common.Parser(prog="fedpne", description="Federated X-armed bandits in JAX",
                                     epilog=f"exit status: 0 done; {EXIT_ERROR} invalid input, or an output that "
                                            f"could not be written (a message says which); {EXIT_INTERRUPTED} "
                                            f"interrupted (Ctrl-C).  Compiled programs are kept in "
                                            f"{compile_cache.default_root()} for the next run; "
                                            f"{compile_cache.ENV}=DIR or =off to change that.  On a CPU every "
                                            f"core is a device and runs share them; {host_devices.ENV}=N or "
                                            f"=off to change that")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the command line's other messages are: one line on stderr, without the source
    line the Python default prints (a degenerate run, a memory budget too small for one run)."""
    print(f"fedpne: warning: {message}", file=sys.stderr)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        # Before a plugin's import can create JAX's backends, which fix the device count.
        host_devices.enable()
    except ValueError as err:
        print(f"fedpne: error: {err}", file=sys.stderr)
        return EXIT_ERROR
    try:
        load_plugins(argv)
    except registry.PluginError as err:
        print(f"fedpne: error: --plugin: {err}", file=sys.stderr)
        return EXIT_ERROR
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "distributed", False):
            try:
                sharding.initialize(args.coordinator, args.num_processes, args.process_id)
            except ValueError as err:       # its parameters named as the options that give them
                named = re.sub(r"\b(coordinator|num_processes|process_id)\b",
                               lambda m: "--" + m.group(0).replace("_", "-"), str(err))
                raise ValueError(f"--distributed: {named}") from None
        else:
            stray = [f"--{name.replace('_', '-')}" for name in ("coordinator", "num_processes", "process_id")
                     if getattr(args, name, None) is not None]
            if stray:
                raise ValueError(f"{', '.join(stray)} without --distributed would be ignored; add --distributed "
                                 f"or leave {'them' if len(stray) > 1 else 'it'} out")
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            compile_cache.enable()
            return COMMANDS[args.command].command(args)
    except (ValueError, MissingExtra, CapacityError, ObjectiveError, workers.WorkerError) as err:
        print(f"fedpne: error: {err}", file=sys.stderr)
    except OSError as err:
        # A file that could not be read or written (a full disk during a sweep, a folder made
        # read-only meanwhile): the message names it, the folder's finished files stay valid.
        where = getattr(args, "out", None) or getattr(args, "output", None)
        print(f"fedpne: error: {describe_os_error(err, where)}", file=sys.stderr)
    except MemoryError as err:
        detail = f" ({err})" if str(err) else ""
        print(f"fedpne: error: out of host memory{detail}; use fewer seeds, clients or rounds", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"fedpne: {COMMANDS[args.command].INTERRUPTED}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_ERROR


def entry() -> None:
    """The ``fedpne`` command and ``python -m fedpne_jax``: :func:`main`'s status as the exit status.

    An interrupted command ends with status 130 as it says, through ``os._exit`` once the exit
    functions have run: the interpreter otherwise sometimes ended it by SIGINT (status -2 to its
    parent) after the KeyboardInterrupt had been caught and the message printed (seen with
    CPython 3.11 when the signal landed while Flower's modules were being imported)."""
    code = main()
    if code == EXIT_INTERRUPTED:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
