"""``fedpne flower``: a run under Flower (fedpne_jax.flower.cli holds the command; this module names it
to the command line, with ``fedpne run``'s options).
"""
from __future__ import annotations

from fedpne_jax.cli import run
from fedpne_jax.cli.common import Defaults, check_output_file, describe_params
from fedpne_jax.flower import cli as flower_cli  # imports no Flower module until a run needs it

NAME = "flower"
INTERRUPTED = "interrupted; every process it started is stopped, the state of the last step is kept"


def add_parser(sub):
    flower_cli.add_parser(sub, run.add_parser, Defaults)


def command(args) -> int:
    return flower_cli.command(args, check_output_file, describe_params)
