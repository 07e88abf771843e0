"""Which compiled operations can make a seed's numbers depend on the processor.

Results are promised bit for bit on any x86-64 processor (docs/concepts/reproducibility.md).  XLA's CPU
backend generates most code itself, the same on every processor, but a few operations it lowers to
something that the processor decides at run time:

* ``rsqrt``: the processor's approximate reciprocal square root (``rsqrtss``, a table that differs
  between Intel and AMD) refined by one Newton step.  XLA also rewrites ``a / sqrt(b)`` into
  ``a * rsqrt(b)``, so plain JAX code produces it (``objectives.ordered.exact_sqrt`` prevents that).
* ``dot``, ``convolution``, ``fft``, ``cholesky``, ``triangular-solve`` and ``custom-call``: library
  kernels (Eigen, oneDNN, XNNPACK, LAPACK) picked at run time for the processor, each with its own
  order of summation (``objectives.ordered.matvec`` is the fixed-order replacement).

Transcendental functions (exp, log, erf_inv, ...) are XLA's own polynomial code; sin and cos call
glibc, whose variant is picked by the processor's FMA support, which every x86-64 processor of this
kind has.

* YNNPACK fusions (``__ynn_fusion``): XLA hands some fusions to YNNPACK's kernels, but only above a
  size, and their arithmetic is not XLA's (an exp, for one): digits' softmax went to YNNPACK for a
  batch of 125 points and not for 4, and one client's accuracy moved by 1/64 between the two.
  Programs the package compiles turn them off (:data:`COMPILER_OPTIONS`, per program, not
  process-wide).

:func:`processor_dependent_ops` lists these kinds in a compiled program's text, so a test can hold
every registered algorithm and objective to it.
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
