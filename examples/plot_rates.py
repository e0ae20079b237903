"""
=====================================
Excess risk against n (rate plot)
=====================================

A well-specified logistic model in d = 10 dimensions: rows uniform on the unit sphere, labels
``P(y = 1 | x) = sigmoid(<w*, x>)`` with ``||w*|| = 2``, so ``w*`` minimises the population
risk. The excess risk ``F(w) - F(w*)`` of a private fit is estimated on one fixed sample of fresh
rows (the same for every fit, which cancels most of its noise), and plotted against n on log-log
axes for ``'phased_sgd'`` and ``'snowball'`` at ε = 1, next to the excess risk of the **trivial**
model ``w = 0`` (predict probability 1/2 everywhere; the labels are balanced), which a private
fit must beat to have learned anything.

This is the setting of the theory: rows of norm 1, so ``data_norm=1.0`` is a public bound that
clips nothing, and the fits run with ``feature_scaling=None`` and the public ``radius=10``
(with the default private feature scaling they would solve a different problem, on standardised
rows). Theory (Feldman, Koren & Talwar 2020, Thm 1.1): for this 1-Lipschitz loss both have excess
risk ``O(1/sqrt(n) + sqrt(d)/(n ε))``, so the slope is −1 while the privacy term dominates and
−1/2 once the statistical term does.

**Where the private fits beat the trivial model.** At ε = 1 the plot starts at n = 10⁴: below it
the private fits are not reliably better than ``w = 0`` (measured over 5 seeds, against 0.045 for
``w = 0``: at n = 1000 the median excess risk is 0.059 for ``'phased_sgd'`` and 0.16 for
``'snowball'``, both worse; at n = 3000 0.029, better at every seed, and 0.049, worse). From n = 10⁴ on both beat it at every one of the 5 seeds
(largest excess risk 0.018 against 0.045). The lines ``private ... vs ...: margin`` below report it
on this page's seeds, with the smallest margin over them (the worst seed).

To keep the documentation build short this uses n up to 10⁵, **3 seeds** and a 10⁵-row
evaluation sample; ``python -m benchmarks quick`` (``rates.py``) runs n from 10³ to 10⁵ (measured
slopes −1.17 for ``'phased_sgd'`` and −1.29 for ``'snowball'``, before the feature scaling
existed, i.e. as here without it).
"""

import matplotlib.pyplot as plt
import numpy as np

from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco.losses import LogisticLoss

D, NORM_W, EPSILON, SEEDS = 10, 2.0, 1.0, 3
SIZES = [10_000, 20_000, 50_000, 100_000]
ALGORITHMS = ["phased_sgd", "snowball"]


def sample(n, rng, w_star):
    X = rng.standard_normal((n, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-X @ w_star)), 1, -1)
    return X, y


rng = np.random.default_rng(12345)
w_star = rng.standard_normal(D)
w_star *= NORM_W / np.linalg.norm(w_star)
X_eval, y_eval = sample(100_000, rng, w_star)
loss = LogisticLoss()
optimum = loss.value(X_eval @ w_star, y_eval).mean()
trivial = loss.value(np.zeros(len(y_eval)), y_eval).mean() - optimum  # the excess risk of w = 0

excess = {name: np.zeros((len(SIZES), SEEDS)) for name in ALGORITHMS}
spent = {}
for name in ALGORITHMS:
    for i, n in enumerate(SIZES):
        for seed in range(SEEDS):
            X, y = sample(n, np.random.default_rng(seed * 7919 + n), w_star)
            model = DPLogisticRegression(
                epsilon=EPSILON, delta=min(1e-5, n**-1.1), data_norm=1.0, feature_scaling=None, fit_intercept=False,
                radius=10.0, algorithm=name, random_state=seed, accountant=PrivacyAccountant(), classes=[-1, 1],
            ).fit(X, y)
            excess[name][i, seed] = loss.value(X_eval @ model.coef_[0], y_eval).mean() - optimum
            spent[name, n] = (model.epsilon_, model.delta_)

# %%
# Median over the seeds, with the fitted log-log slope in the legend, reference slopes −1 and
# −1/2, and the trivial model ``w = 0`` (grey).

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
ax.axhline(trivial, color="grey", linewidth=0.8, label="w = 0 (trivial)")
ax.set(xscale="log", yscale="log", xlabel="n (training rows)", ylabel="excess population risk",
       title=f"synthetic logistic, d = {D}, ε = {EPSILON:g}")
ax.legend(loc="lower left", fontsize=8)
fig.tight_layout()
plt.show()

# %%
# Every private fit against the trivial model (lower is better): the median excess risk over the
# seeds, the margin to ``w = 0``, the smallest margin over the seeds, and what each fit spent.
# The non-private reference here is ``w*`` itself, whose excess risk is 0 by definition: the
# private excess risk *is* what privacy (and the finite sample) gives up.

print(f"w = 0 (trivial): excess risk {trivial:.2e}")
for name, values in excess.items():
    for i, n in enumerate(SIZES):
        private = np.median(values[i])
        print(f"{name} at n={n}: private {private:.2e} vs w = 0 {trivial:.2e}: margin {trivial - private:+.2e} "
              f"(lower is better; smallest over the {SEEDS} seeds {trivial - values[i].max():+.2e}); "
              f"spent ε={spent[name, n][0]:.3f}, δ={spent[name, n][1]:.2g}")
