"""Random rows for the solvers' sensitivity tests (shared by tests/test_newton*.py)."""

import numpy as np


def rows_in_ball(rng, n, p, norm):
    """Rows of norm at most ``norm``, a quarter of them on the sphere."""
    X = rng.standard_normal((n, p))
    X *= norm * rng.uniform(0.0, 1.0, (n, 1)) ** (1.0 / p) / np.linalg.norm(X, axis=1, keepdims=True)
    X[: n // 4] *= norm / np.linalg.norm(X[: n // 4], axis=1, keepdims=True)
    return X
