"""Client objectives for tests/test_flower.py, imported by the ClientApp processes as
``tests.test_flower_functions:NAME`` (this file holds no tests)."""
import numpy as np


def quadratic(partition, points):
    """A noise-free client objective: -(x - 0.3 - 0.1 m)^2 summed over dimensions."""
    return -np.sum((np.asarray(points) - 0.3 - 0.1 * partition) ** 2, axis=-1)


quadratic.deterministic = True


def nan_at_client_1(partition, points):
    values = quadratic(partition, points)
    return np.full_like(values, np.nan) if partition == 1 else values


nan_at_client_1.deterministic = True


def one_too_many_at_client_2(partition, points):
    values = quadratic(partition, points)
    return np.append(values, 0.0) if partition == 2 else values


one_too_many_at_client_2.deterministic = True
