"""Is full whitening worth a release? An upper bound with oracle transforms (issue 15 item 1).

    python -m benchmarks.whitening            # writes benchmarks/results/whitening.md

Issue 15 asks for full whitening (a noisy second-moment matrix with a ridge at the noise level)
"where it wins, decided by a public rule and measurement". Before building its release, this
measures what it could win at best: both transforms are fitted **without privacy** on the training
rows (an oracle, not a private model), then ``DPLogisticRegression(feature_scaling=None,
data_norm=sqrt(d))`` trains on the transformed rows with the **whole** budget:

* ``standardise``: ``StandardScaler`` (per-feature mean and spread, what the default's private
  scaling estimates);
* ``whiten``: ``(x - mean) C^(-1/2)`` with ``C`` the covariance (eigenvalues floored at 1e-6 of
  the largest).

A private whitening would pay for a ``d x d`` release on top of the per-feature ones and add its
noise to ``C^(-1/2)``: it can only do worse than this oracle. If the oracle whitening does not beat
the oracle standardisation, the private one cannot beat the private standardisation either.
Data: the benchmark's classification sets and the validation sets of :mod:`benchmarks.real`
(same splits and deltas), 10 seeds; AUC (binary) or accuracy (multi-class).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from skdpsco import DPLogisticRegression, PrivacyAccountant

from . import real
from .machine import machine_info
from .utility import RESULTS

EPSILONS = (1.0, 3.0, 10.0)


def standardiser(X: np.ndarray):
    """The oracle per-feature standardisation of ``X``'s rows."""
    return StandardScaler().fit(X).transform


def whitener(X: np.ndarray):
    """The oracle whitening ``(x - mean) C^(-1/2)`` of ``X``'s rows."""
    mean = X.mean(axis=0)
    values, vectors = np.linalg.eigh(np.cov(X - mean, rowvar=False))
    values = np.maximum(values, 1e-6 * values.max())
    inverse_root = vectors @ np.diag(values**-0.5) @ vectors.T
    return lambda rows: (rows - mean) @ inverse_root


TRANSFORMS = {"standardise": standardiser, "whiten": whitener}


def score(dataset, transform, epsilon: float, seed: int, X, y) -> float:
    X_train, X_test, y_train, y_test = real.split(dataset, X, y, seed)
    mapped = transform(X_train)
    model = DPLogisticRegression(
        epsilon=epsilon, delta=real.default_delta(len(y_train)), feature_scaling=None,
        data_norm=float(np.sqrt(X.shape[1])), classes=list(dataset.classes), random_state=seed,
        accountant=PrivacyAccountant(),
    ).fit(mapped(X_train), y_train)
    if dataset.task == "binary":
        return float(roc_auc_score(y_test, model.decision_function(mapped(X_test))))
    return float(np.mean(model.predict(mapped(X_test)) == y_test))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sets = [d for d in (*real.DATASETS.values(), *real.VALIDATION.values()) if d.task != "regression"]
    lines = ["| data set | metric | " + " | ".join(f"{t} ε={e:g}" for t in TRANSFORMS for e in EPSILONS) + " | whitening wins |",
             "|---|---|" + "---|" * (len(TRANSFORMS) * len(EPSILONS) + 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dataset in sets:
            X, y = dataset.load()
            means = {(name, e): np.mean([score(dataset, make, e, s, X, y) for s in range(args.seeds)])
                     for name, make in TRANSFORMS.items() for e in EPSILONS}
            wins = sum(means[("whiten", e)] > means[("standardise", e)] + 0.005 for e in EPSILONS)
            origin = "validation" if dataset.name in real.VALIDATION else "benchmark"
            lines.append(f"| {dataset.name} ({origin}) | {real.METRICS[dataset.task][0]} | "
                         + " | ".join(f"{means[(t, e)]:.3f}" for t in TRANSFORMS for e in EPSILONS)
                         + f" | {wins} of {len(EPSILONS)} |")
    text = "\n".join(lines)
    header = (f"# Oracle whitening against oracle standardisation (`python -m benchmarks.whitening`)\n\n"
              f"Machine: {machine_info()}\n\nRun: {args.seeds} seeds, {(time.perf_counter() - started) / 60:.1f} min. "
              "Both transforms fitted without privacy (an upper bound for a private one); the private "
              "model gets the whole budget. 'Wins': more than 0.005 above standardisation.\n\n")
    (RESULTS / "whitening.md").write_text(header + text + "\n")
    print(text)


if __name__ == "__main__":
    main()
