"""Test support: the plain NumPy reference implementations (written from the papers and the
algorithms' public code, sharing no code with the package) and small helpers, importable by the
tests and the benchmark scripts as ``tests.support``."""
