"""Rates: excess population risk against n on a synthetic problem with a known minimiser.

Well-specified logistic model: rows uniform on the unit sphere in d = 10 dimensions, labels
``P(y = 1 | x) = sigmoid(<w*, x>)`` with ``||w*|| = 2`` inside the domain ball (radius 10), so ``w*``
minimises the population risk. Excess risk ``F(w) - F(w*)`` is estimated on one fixed sample of
``200_000`` fresh rows (the same for every fit, which cancels most of its noise), median over seeds,
and the log-log slope against n is fitted per algorithm. Theory (``shared/spec``): the optimal
convex algorithms (Snowball, Phased-SGD; FKT20 Thm 1.1, ``feldman.md`` §A5) have excess risk
``O(1/sqrt(n) + sqrt(d)/(n epsilon))`` (for this 1-Lipschitz loss), so slope -1 while the privacy
term dominates and -1/2 once the statistical term does; PNSGD (FMTT18) has the same -1/2.
"""

from __future__ import annotations

import numpy as np

from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco.losses import LogisticLoss

RATE_ENTRIES = {"snowball": "-1 (privacy term) then -1/2", "phased_sgd": "-1 (privacy term) then -1/2"}
"""Algorithms measured and the slope the theory predicts."""

D, NORM_W, EVAL_ROWS = 10, 2.0, 200_000


def _sample(n, rng, w_star):
    X = rng.standard_normal((n, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-X @ w_star)), 1, -1)
    return X, y


def run(sizes, seeds, epsilon=1.0):
    rng = np.random.default_rng(12345)
    w_star = rng.standard_normal(D)
    w_star *= NORM_W / np.linalg.norm(w_star)
    X_eval, y_eval = _sample(EVAL_ROWS, rng, w_star)
    loss = LogisticLoss()
    optimum = float(loss.value(X_eval @ w_star, y_eval).mean())
    records = []
    for algorithm in RATE_ENTRIES:
        for n in sizes:
            for seed in range(seeds):
                X, y = _sample(n, np.random.default_rng(seed * 7919 + n), w_star)
                model = DPLogisticRegression(
                    epsilon=epsilon, delta=min(1e-5, n**-1.1), fit_intercept=False, radius=10.0,
                    algorithm=algorithm, random_state=seed, accountant=PrivacyAccountant(), classes=[-1, 1],
                )
                try:
                    model.fit(X, y)
                except ValueError as exc:
                    records.append({"algorithm": algorithm, "n": n, "seed": seed, "error": str(exc)[:80]})
                    continue
                risk = float(loss.value(X_eval @ model.coef_[0], y_eval).mean())
                records.append({"algorithm": algorithm, "n": n, "seed": seed, "excess_risk": risk - optimum})
    return records


def summary(records):
    """Median excess risk per (algorithm, n) and the fitted log-log slope per algorithm."""
    medians, slopes = {}, {}
    for algorithm in RATE_ENTRIES:
        points = []
        for n in sorted({r["n"] for r in records if r["algorithm"] == algorithm}):
            values = [r["excess_risk"] for r in records if r["algorithm"] == algorithm and r["n"] == n and "excess_risk" in r]
            if values:
                medians[(algorithm, n)] = float(np.median(values))
                points.append((n, max(medians[(algorithm, n)], 1e-12)))
        if len(points) >= 2:
            slopes[algorithm] = float(np.polyfit(*np.log(np.array(points)).T, 1)[0])
    return medians, slopes


def table(medians, slopes) -> str:
    lines = ["| algorithm | n | median excess risk | fitted slope | theory |", "|---|---|---|---|---|"]
    for (algorithm, n), value in medians.items():
        lines.append(f"| {algorithm} | {n:.0e} | {value:.2e} | {slopes.get(algorithm, float('nan')):.2f} | "
                     f"{RATE_ENTRIES[algorithm]} |")
    return "\n".join(lines)
