"""
=====================================
Excess risk against n (rate plot)
=====================================

A well-specified logistic model in d = 10 dimensions: rows uniform on the unit sphere, labels
``P(y = 1 | x) = sigmoid(<w*, x>)`` with ``||w*|| = 2``, so ``w*`` minimises the population
risk. The excess risk ``F(w) - F(w*)`` of a private fit is estimated on one fixed sample of fresh
rows (the same for every fit, which cancels most of its noise), and plotted against n on log-log
axes for ``'phased_sgd'`` (the ``'auto'`` choice) and ``'snowball'`` at ε = 1.

Theory (Feldman, Koren & Talwar 2020, Thm 1.1): for this 1-Lipschitz loss both have excess risk
``O(1/sqrt(n) + sqrt(d)/(n ε))``, so the slope is −1 while the privacy term dominates and −1/2
once the statistical term does. To keep the documentation build short this uses n up to 3·10⁴,
**3 seeds** and a 5·10⁴-row evaluation sample; ``python -m benchmarks quick`` (``rates.py``) runs
n up to 10⁶ (measured slopes −1.13 for ``'phased_sgd'`` and −1.22 for ``'snowball'``).
"""

import matplotlib.pyplot as plt
import numpy as np

from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco.losses import LogisticLoss

D, NORM_W, EPSILON, SEEDS = 10, 2.0, 1.0, 3
SIZES = [1000, 3000, 10_000, 30_000]
ALGORITHMS = ["phased_sgd", "snowball"]


def sample(n, rng, w_star):
    X = rng.standard_normal((n, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-X @ w_star)), 1, -1)
    return X, y


rng = np.random.default_rng(12345)
w_star = rng.standard_normal(D)
w_star *= NORM_W / np.linalg.norm(w_star)
X_eval, y_eval = sample(50_000, rng, w_star)
loss = LogisticLoss()
optimum = loss.value(X_eval @ w_star, y_eval).mean()

excess = {name: np.zeros((len(SIZES), SEEDS)) for name in ALGORITHMS}
for name in ALGORITHMS:
    for i, n in enumerate(SIZES):
        for seed in range(SEEDS):
            X, y = sample(n, np.random.default_rng(seed * 7919 + n), w_star)
            model = DPLogisticRegression(
                epsilon=EPSILON, delta=min(1e-5, n**-1.1), fit_intercept=False, radius=10.0,
                algorithm=name, random_state=seed, accountant=PrivacyAccountant(), classes=[-1, 1],
            ).fit(X, y)
            excess[name][i, seed] = loss.value(X_eval @ model.coef_[0], y_eval).mean() - optimum

# %%
# Median over the seeds, with the fitted log-log slope in the legend and reference slopes −1 and
# −1/2.

fig, ax = plt.subplots(figsize=(6, 4.5))
for name, values in excess.items():
    median = np.median(values, axis=1)
    slope = np.polyfit(np.log(SIZES), np.log(np.maximum(median, 1e-12)), 1)[0]
    ax.plot(SIZES, median, marker="o", label=f"{name} (slope {slope:.2f})")
    print(f"{name}: median excess risk", " ".join(f"{m:.2e}" for m in median), f"slope {slope:.2f}")
anchor = np.median(excess["phased_sgd"][0])
sizes = np.array(SIZES, dtype=float)
ax.plot(sizes, anchor * (sizes / sizes[0]) ** -1.0, "k--", linewidth=0.8, label="slope −1")
ax.plot(sizes, anchor * (sizes / sizes[0]) ** -0.5, "k:", linewidth=0.8, label="slope −1/2")
ax.set(xscale="log", yscale="log", xlabel="n (training rows)", ylabel="excess population risk",
       title=f"synthetic logistic, d = {D}, ε = {EPSILON:g}")
ax.legend()
fig.tight_layout()
plt.show()
