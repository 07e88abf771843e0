"""Baselines of the paper's comparison (Section 5, Appendix E), one module each; see fedpne_jax.baseline."""
