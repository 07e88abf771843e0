"""Which compiled operations can make a seed's numbers depend on the processor.

Results are promised bit for bit on any x86-64 processor.  A few operations XLA's CPU backend lowers
to something the processor decides at run time: ``rsqrt``; ``dot``, ``convolution``, ``fft``,
``cholesky``, ``triangular-solve`` and ``custom-call`` (library kernels); and YNNPACK fusions, which
the package's programs turn off (:data:`COMPILER_OPTIONS`, per program).
:func:`processor_dependent_ops` lists these kinds in a compiled program's text, so a test can hold
every registered algorithm and objective to it.

Why each one matters and what the package writes instead: docs/concepts/reproducibility.md.
"""
from __future__ import annotations

import re

PROCESSOR_DEPENDENT_OPS = ("rsqrt", "dot", "convolution", "fft", "cholesky", "triangular-solve", "custom-call")
_OP = re.compile(r"=\s*\S+\s+(" + "|".join(re.escape(op) for op in PROCESSOR_DEPENDENT_OPS) + r")\(")


# XLA options of every program the package compiles (``Lowered.compile(compiler_options=...)``).
COMPILER_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}


def processor_dependent_ops(hlo_text: str) -> list[str]:
    """The processor-dependent operations in an (optimized) HLO program's text, one entry per
    occurrence, e.g. ``compiled.as_text()`` of a ``jax.jit(...).lower(...).compile()``; a YNNPACK
    fusion is listed as ``ynn-fusion``."""
    return [m.group(1) for m in _OP.finditer(hlo_text)] + ["ynn-fusion"] * hlo_text.count('"__ynn_fusion"')
