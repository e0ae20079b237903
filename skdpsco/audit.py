"""Empirical privacy auditing by hypothesis testing.

A randomized mechanism ``M`` is (epsilon, delta)-differentially private under the
replace-one neighbouring relation if, for every pair of neighbouring datasets
``D0, D1`` and every measurable set ``S`` of outputs,

.. math::

    P[M(D_1) \\in S] \\le e^{\\varepsilon} P[M(D_0) \\in S] + \\delta

and the same with the roles of ``D0`` and ``D1`` swapped (the relation is
symmetric). An *audit* (Jagielski, Ullman and Oprea 2020; Nasr et al. 2021) runs
the mechanism many times on two fixed neighbouring datasets, reduces every
release to a scalar statistic ``s`` and picks a rejection set
``S = {s >= t}`` or ``S = {s <= t}``. With a lower confidence bound
``tpr_lower`` on the probability of ``S`` under the "positive" dataset and an
upper confidence bound ``fpr_upper`` on its probability under the other one,
any (epsilon, delta)-DP mechanism must satisfy

.. math::

    \\varepsilon \\ge \\ln\\frac{\\mathrm{tpr\\_lower} - \\delta}{\\mathrm{fpr\\_upper}},

so the right-hand side is a *lower bound* on the epsilon of the mechanism at
``delta``. If it exceeds the epsilon a mechanism claims, the claim is refuted
(with the stated confidence).

Statistical procedure (what :func:`epsilon_lower_bound` does)
-------------------------------------------------------------
1. **Split.** The trials of each dataset are split, by a random permutation
   drawn from ``random_state`` (independent of the statistics' values), into a
   *selection* part (a fraction ``selection_fraction``) and a held-out
   *evaluation* part.
2. **Select one test on the selection part.** Every combination of

   * threshold ``t`` -- each distinct value of the pooled selection statistics
     (at most 20000 of them, evenly spaced in rank, for very large audits),
   * tail -- ``"upper"`` (``S = {s >= t}``) or ``"lower"`` (``S = {s <= t}``),
   * direction -- which dataset plays the "positive" role (both orders),

   is scored by the epsilon bound it would give on a held-out sample of the
   evaluation size (Clopper--Pearson bounds computed from the selection
   counts rescaled to the evaluation size). The best-scoring single test is
   kept. This step may look at the data as much as it likes: its output is
   just *one* rejection set.
3. **Evaluate that one test on the held-out part.** Count how many held-out
   statistics of each dataset fall in ``S`` and compute exact one-sided
   Clopper--Pearson bounds, each at level ``1 - alpha/2`` with
   ``alpha = 1 - confidence`` (a union bound, so the pair holds jointly with
   probability at least ``confidence`` even if the two samples are
   dependent). Report ``max(0, ln((tpr_lower - delta) / fpr_upper))``.

Why this is valid. Conditionally on the selection part, the chosen set ``S``
is fixed, and the evaluation trials are independent of the selection trials
and identically distributed, so the held-out counts are binomial with the
true probabilities of ``S``. Hence with probability at least ``confidence``,
``tpr_lower <= P_pos(S)`` and ``fpr_upper >= P_neg(S)``, and on that event the
DP inequality gives ``epsilon >= ln((tpr_lower - delta) / fpr_upper)``. Averaging
over the selection part keeps the guarantee unconditional. Because only a
single hypothesis (one threshold, one tail, one direction) is ever evaluated
on the held-out data, the search over thresholds, both tails and both
directions needs **no** multiplicity correction: the selection data absorbs
it. (The alternative -- evaluating a fixed public grid of ``m`` thresholds
times 2 tails times 2 directions on all the data -- would need a Bonferroni
factor ``4 m``; the split is preferred because it tests the data-adapted
threshold at full confidence.)

The bound is only as good as the statistic and the datasets: a result of
``0.0`` shows nothing, it never certifies privacy.
"""

# Privacy model: replace-one neighbouring datasets (see shared/DESIGN.md,
# "Tests that make a privacy claim believable", item 2).

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

__all__ = [
    "AuditResult",
    "MIN_TRIALS",
    "audit_mechanism",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
]

#: Smallest number of trials per dataset accepted by the audit functions.
#: Fewer trials cannot give a meaningful bound once split in two parts.
MIN_TRIALS = 10

_TAILS = ("upper", "lower")

#: Cap on the number of candidate thresholds scored in the selection step. With
#: more distinct selection values, evenly spaced order statistics of the pooled
#: selection sample are used (this only affects power, never validity).
_MAX_CANDIDATES = 20_000


@dataclass(frozen=True)
class AuditResult:
    """Outcome of an empirical privacy audit.

    Attributes
    ----------
    epsilon_lower_bound : float
        Lower bound on the epsilon of the audited mechanism at ``delta``,
        valid with probability at least ``confidence``. ``0.0`` when nothing
        can be shown.
    delta : float
        The delta at which the bound holds.
    confidence : float
        Confidence level of the bound.
    n_trials : int
        Number of trials per dataset (selection and evaluation together).
    threshold : float
        Threshold ``t`` of the rejection set chosen on the selection trials.
    tail : str
        ``"upper"`` for ``S = {s >= t}``, ``"lower"`` for ``S = {s <= t}``.
    tpr_lower : float
        One-sided Clopper--Pearson lower bound on ``P(s in S)`` under the
        positive dataset, from the held-out trials.
    fpr_upper : float
        One-sided Clopper--Pearson upper bound on ``P(s in S)`` under the
        other dataset, from the held-out trials.
    positive_dataset : int
        ``1`` if the statistics of ``dataset_1`` / ``stats_1`` gave
        ``tpr_lower`` (and those of dataset 0 gave ``fpr_upper``), ``0`` for
        the swapped direction.
    n_evaluation : int
        Number of held-out trials per dataset on which the bounds were
        computed.
    """

    epsilon_lower_bound: float
    delta: float
    confidence: float
    n_trials: int
    threshold: float
    tail: str
    tpr_lower: float
    fpr_upper: float
    positive_dataset: int = 1
    n_evaluation: int = 0

    def violates(self, claimed_epsilon: float) -> bool:
        """Whether the audit refutes a claimed epsilon.

        Parameters
        ----------
        claimed_epsilon : float
            Epsilon the mechanism claims at ``self.delta``.

        Returns
        -------
        bool
            ``True`` if ``epsilon_lower_bound > claimed_epsilon``.
        """
        return bool(self.epsilon_lower_bound > claimed_epsilon)


# ---------------------------------------------------------------------------
# Clopper--Pearson bounds
# ---------------------------------------------------------------------------


def clopper_pearson_lower(k, n, alpha):
    """Exact one-sided Clopper--Pearson lower confidence bound.

    Parameters
    ----------
    k : float or array-like
        Number of successes, ``0 <= k <= n``. Non-integer values are allowed
        (the beta quantile is continuous in ``k``); they are used to *predict*
        the bound a sample of size ``n`` would give.
    n : int
        Number of trials (positive).
    alpha : float
        Error probability of the one-sided bound, in ``(0, 1)``.

    Returns
    -------
    ndarray or float
        ``p_lo`` such that ``P(p >= p_lo) >= 1 - alpha``; ``0`` when ``k == 0``.
    """
    k = np.asarray(k, dtype=float)
    out = np.zeros_like(k)
    pos = k > 0
    if np.any(pos):
        kp = k[pos]
        out[pos] = beta.ppf(alpha, kp, n - kp + 1.0)
    full = k >= n
    # Closed form at k == n (avoids any ppf edge inaccuracy): alpha ** (1 / n).
    out[full] = alpha ** (1.0 / n)
    return out if out.ndim else float(out)


def clopper_pearson_upper(k, n, alpha):
    """Exact one-sided Clopper--Pearson upper confidence bound.

    Parameters
    ----------
    k : float or array-like
        Number of successes, ``0 <= k <= n``.
    n : int
        Number of trials (positive).
    alpha : float
        Error probability of the one-sided bound, in ``(0, 1)``.

    Returns
    -------
    ndarray or float
        ``p_hi`` such that ``P(p <= p_hi) >= 1 - alpha``; ``1`` when ``k == n``.
    """
    k = np.asarray(k, dtype=float)
    out = np.ones_like(k)
    part = k < n
    if np.any(part):
        kp = k[part]
        out[part] = beta.ppf(1.0 - alpha, kp + 1.0, n - kp)
    zero = k <= 0
    # Closed form at k == 0: 1 - alpha ** (1 / n) (computed without cancellation).
    out[zero] = -np.expm1(np.log(alpha) / n)
    return out if out.ndim else float(out)


# ---------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------


def _check_delta(delta):
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise TypeError(f"delta must be a real number in [0, 1), got {delta!r}.")
    delta = float(delta)
    if not (0.0 <= delta < 1.0):
        raise ValueError(f"delta must be in [0, 1), got {delta!r}.")
    return delta


def _check_confidence(confidence):
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        raise TypeError(f"confidence must be a real number in (0, 1), got {confidence!r}.")
    confidence = float(confidence)
    if not (0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}.")
    return confidence


def _check_n_trials(n_trials):
    if isinstance(n_trials, bool) or not isinstance(n_trials, numbers.Integral):
        raise TypeError(f"n_trials must be an integer, got {n_trials!r}.")
    n_trials = int(n_trials)
    if n_trials < MIN_TRIALS:
        raise ValueError(
            f"n_trials must be at least {MIN_TRIALS} per dataset, got {n_trials}."
        )
    return n_trials


def _check_stats(stats, name):
    arr = np.asarray(stats, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of scalar statistics, got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return arr


def _seed_sequence(random_state):
    """Turn ``random_state`` into a :class:`numpy.random.SeedSequence`."""
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if random_state is None or (
        isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool)
    ):
        return np.random.SeedSequence(random_state)
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(random_state.integers(0, 2**63, size=4).tolist())
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(
            random_state.randint(0, 2**31, size=4).tolist()
        )
    raise TypeError(
        "random_state must be None, an int, a numpy SeedSequence, Generator or "
        f"RandomState, got {random_state!r}."
    )


# ---------------------------------------------------------------------------
# Pure statistics
# ---------------------------------------------------------------------------


def _counts(sorted_stats, thresholds):
    """Counts of ``s >= t`` and ``s <= t`` for each threshold."""
    n = sorted_stats.shape[0]
    upper = n - np.searchsorted(sorted_stats, thresholds, side="left")
    lower = np.searchsorted(sorted_stats, thresholds, side="right")
    return upper, lower


def _eps_from_bounds(tpr_lo, fpr_hi, delta):
    """``ln((tpr_lo - delta) / fpr_hi)``, ``-inf`` where not positive."""
    tpr_lo = np.asarray(tpr_lo, dtype=float)
    num = tpr_lo - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.where(num > 0, np.log(np.maximum(num, 1e-300)) - np.log(fpr_hi), -np.inf)
    return eps


def epsilon_lower_bound(
    stats_0,
    stats_1,
    delta,
    *,
    confidence=0.95,
    selection_fraction=0.5,
    random_state=None,
):
    """Lower bound on epsilon from two samples of a scalar statistic.

    ``stats_0[i]`` (``stats_1[i]``) is the statistic of the ``i``-th
    independent run of a mechanism on the neighbouring dataset ``D0``
    (``D1``). The trials of each dataset are split at random into a selection
    part, on which one rejection set (threshold, tail and direction) is chosen,
    and a held-out evaluation part, on which that single set is tested with
    exact Clopper--Pearson bounds. See the module docstring for the procedure
    and why it is valid.

    Parameters
    ----------
    stats_0, stats_1 : array-like of shape (n_trials,)
        Statistics of independent runs on the two datasets; same length,
        finite values, at least :data:`MIN_TRIALS` each. Within each array the
        entries must be i.i.d.; the two arrays may be dependent.
    delta : float
        The delta at which the bound is computed, in ``[0, 1)``.
    confidence : float, default=0.95
        Probability, in ``(0, 1)``, with which the returned bound holds.
    selection_fraction : float, default=0.5
        Fraction, in ``(0, 1)``, of each dataset's trials used to choose the
        rejection set; the rest is held out for the bound. Both parts must be
        non-empty.
    random_state : None, int, SeedSequence, Generator or RandomState, default=None
        Randomness of the split (independent of the statistics' values).

    Returns
    -------
    AuditResult
        The bound, together with the chosen test and its confidence bounds.

    Raises
    ------
    ValueError
        If the arrays are not 1-D, differ in length, contain NaN/inf or have
        fewer than :data:`MIN_TRIALS` entries, or if ``delta``,
        ``confidence`` or ``selection_fraction`` is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> s0 = rng.normal(0.0, 0.5, size=2000)
    >>> s1 = rng.normal(1.0, 0.5, size=2000)
    >>> res = epsilon_lower_bound(s0, s1, delta=1e-5, random_state=0)
    >>> res.epsilon_lower_bound > 1.0
    True
    """
    s0 = _check_stats(stats_0, "stats_0")
    s1 = _check_stats(stats_1, "stats_1")
    if s0.shape[0] != s1.shape[0]:
        raise ValueError(
            "stats_0 and stats_1 must have the same length (trials per dataset), "
            f"got {s0.shape[0]} and {s1.shape[0]}."
        )
    n = s0.shape[0]
    if n < MIN_TRIALS:
        raise ValueError(f"need at least {MIN_TRIALS} trials per dataset, got {n}.")
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    if isinstance(selection_fraction, bool) or not isinstance(selection_fraction, numbers.Real):
        raise TypeError(f"selection_fraction must be a real number, got {selection_fraction!r}.")
    selection_fraction = float(selection_fraction)
    if not (0.0 < selection_fraction < 1.0):
        raise ValueError(f"selection_fraction must be in (0, 1), got {selection_fraction!r}.")
    n_sel = int(math.floor(selection_fraction * n))
    n_eval = n - n_sel
    if n_sel < 1 or n_eval < 1:
        raise ValueError(
            f"selection_fraction={selection_fraction} leaves an empty selection or "
            f"evaluation part with {n} trials."
        )

    # 1. Data-independent random split of each sample.
    ss = _seed_sequence(random_state)
    rng = np.random.default_rng(ss)
    perm0 = rng.permutation(n)
    perm1 = rng.permutation(n)
    sel = (np.sort(s0[perm0[:n_sel]]), np.sort(s1[perm1[:n_sel]]))
    ev = (np.sort(s0[perm0[n_sel:]]), np.sort(s1[perm1[n_sel:]]))

    alpha_each = (1.0 - confidence) / 2.0  # union bound over the two intervals

    # 2. Choose one (threshold, tail, direction) on the selection part, scoring
    #    every candidate by the bound it would give on a held-out sample of size
    #    n_eval (selection counts rescaled to that size).
    thresholds = np.unique(np.concatenate(sel))
    if thresholds.size > _MAX_CANDIDATES:
        keep = np.unique(np.linspace(0, thresholds.size - 1, _MAX_CANDIDATES).round().astype(int))
        thresholds = thresholds[keep]
    scale = n_eval / n_sel
    up0, lo0 = _counts(sel[0], thresholds)
    up1, lo1 = _counts(sel[1], thresholds)
    counts = {0: {"upper": up0, "lower": lo0}, 1: {"upper": up1, "lower": lo1}}
    best = None  # (score, tiebreak, threshold, tail, positive)
    for positive in (1, 0):
        for tail in _TAILS:
            k_pos = counts[positive][tail] * scale
            k_neg = counts[1 - positive][tail] * scale
            tpr_lo = np.atleast_1d(clopper_pearson_lower(k_pos, n_eval, alpha_each))
            fpr_hi = np.atleast_1d(clopper_pearson_upper(k_neg, n_eval, alpha_each))
            score = _eps_from_bounds(tpr_lo, fpr_hi, delta)
            # Tie-break / fallback when no candidate gives a positive bound:
            # the largest gap between the two bounds.
            gap = tpr_lo - delta - fpr_hi
            idx = int(np.lexsort((gap, score))[-1])
            cand = (score[idx], gap[idx], float(thresholds[idx]), tail, positive)
            if best is None or (cand[0], cand[1]) > (best[0], best[1]):
                best = cand
    _, _, threshold, tail, positive = best

    # 3. Evaluate the single chosen test on the held-out part.
    def in_set(sorted_stats):
        up, lo = _counts(sorted_stats, np.array([threshold]))
        return int((up if tail == "upper" else lo)[0])

    k_pos = in_set(ev[positive])
    k_neg = in_set(ev[1 - positive])
    tpr_lower = float(clopper_pearson_lower(k_pos, n_eval, alpha_each))
    fpr_upper = float(clopper_pearson_upper(k_neg, n_eval, alpha_each))
    eps = float(_eps_from_bounds(tpr_lower, fpr_upper, delta))
    eps = max(0.0, eps) if np.isfinite(eps) else 0.0

    return AuditResult(
        epsilon_lower_bound=eps,
        delta=delta,
        confidence=confidence,
        n_trials=n,
        threshold=threshold,
        tail=tail,
        tpr_lower=tpr_lower,
        fpr_upper=fpr_upper,
        positive_dataset=positive,
        n_evaluation=n_eval,
    )


# ---------------------------------------------------------------------------
# Running a mechanism
# ---------------------------------------------------------------------------


def _default_statistic(output):
    arr = np.asarray(output, dtype=float)
    if arr.size != 1:
        raise ValueError(
            "the default statistic needs a scalar output; the mechanism returned "
            f"an output of shape {arr.shape}. Pass statistic=..."
        )
    return float(arr.reshape(()))


def _one_trial(run, statistic, dataset, seed):
    value = statistic(run(dataset, seed))
    return float(value)


def _trial_seeds(ss, n_seeds):
    """``n_seeds`` distinct 32-bit integer seeds, one per spawned child.

    32-bit integers are accepted by every random-number API in use
    (``np.random.default_rng``, ``np.random.RandomState`` and scikit-learn's
    ``random_state``). Truncation could make two children collide, so
    collisions are redrawn deterministically from the child's own stream.
    """
    seeds = []
    seen = set()
    for child in ss.spawn(n_seeds):
        words = child.generate_state(64, dtype=np.uint32)
        for w in words:
            w = int(w)
            if w not in seen:
                break
        else:  # pragma: no cover - probability ~ (n / 2**32) ** 64
            raise RuntimeError("could not draw distinct trial seeds")
        seen.add(w)
        seeds.append(w)
    return seeds


def audit_mechanism(
    run,
    dataset_0,
    dataset_1,
    *,
    n_trials,
    delta,
    statistic=None,
    confidence=0.95,
    random_state=None,
    n_jobs=None,
):
    """Audit a randomized mechanism on two neighbouring datasets.

    Runs ``run(dataset_0, seed)`` and ``run(dataset_1, seed)`` ``n_trials``
    times each with independent seeds, reduces every output to a float with
    ``statistic`` and returns :func:`epsilon_lower_bound` of the two samples.

    Parameters
    ----------
    run : callable
        ``run(dataset, seed) -> output``. ``dataset`` is ``dataset_0`` or
        ``dataset_1`` unchanged; ``seed`` is a Python ``int`` in
        ``[0, 2**32)``, distinct for every trial, that must be the *only*
        source of randomness of the mechanism (pass it to
        ``np.random.default_rng`` or as an estimator's ``random_state``).
        The output may be anything ``statistic`` accepts (an array, a float, a
        fitted estimator). With ``n_jobs`` other than ``None``/``1`` it must be
        picklable by joblib (cloudpickle handles lambdas and closures).
    dataset_0, dataset_1 : object
        Opaque neighbouring datasets (for example ``(X, y)`` tuples differing
        in one row), passed to ``run`` as they are.
    n_trials : int
        Number of runs per dataset, at least :data:`MIN_TRIALS`.
    delta : float
        The delta at which the bound is computed, in ``[0, 1)``.
    statistic : callable, default=None
        ``statistic(output) -> float``. ``None`` converts the output itself to
        a float (it must then be a scalar).
    confidence : float, default=0.95
        Probability, in ``(0, 1)``, with which the bound holds.
    random_state : None, int, SeedSequence, Generator or RandomState, default=None
        Root of the seeds. ``np.random.SeedSequence(random_state)`` is spawned
        into one child per trial (and one for the selection/evaluation split),
        so the trials are independent and the whole audit is reproducible for
        a fixed ``random_state``, whatever ``n_jobs``.
    n_jobs : int, default=None
        Number of joblib workers; ``None`` runs sequentially.

    Returns
    -------
    AuditResult
        See :func:`epsilon_lower_bound`.

    Raises
    ------
    ValueError
        If ``n_trials``, ``delta`` or ``confidence`` is out of range, or if a
        statistic is NaN or infinite.

    Examples
    --------
    >>> import numpy as np
    >>> def run(x, seed):
    ...     return x + np.random.default_rng(seed).normal(scale=0.5)
    >>> res = audit_mechanism(run, 0.0, 1.0, n_trials=1000, delta=1e-5,
    ...                       random_state=0)
    >>> res.n_trials
    1000
    """
    if not callable(run):
        raise TypeError("run must be callable as run(dataset, seed).")
    n_trials = _check_n_trials(n_trials)
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    if statistic is None:
        statistic = _default_statistic
    elif not callable(statistic):
        raise TypeError("statistic must be callable as statistic(output) -> float.")

    ss = _seed_sequence(random_state)
    split_ss, trials_ss = ss.spawn(2)
    seeds = _trial_seeds(trials_ss, 2 * n_trials)
    jobs = [(dataset_0, s) for s in seeds[:n_trials]] + [
        (dataset_1, s) for s in seeds[n_trials:]
    ]

    if n_jobs is None or n_jobs == 1:
        values = [_one_trial(run, statistic, d, s) for d, s in jobs]
    else:
        from joblib import Parallel, delayed

        values = Parallel(n_jobs=n_jobs)(
            delayed(_one_trial)(run, statistic, d, s) for d, s in jobs
        )

    values = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError("statistic returned NaN or infinite values.")
    return epsilon_lower_bound(
        values[:n_trials],
        values[n_trials:],
        delta,
        confidence=confidence,
        random_state=split_ss,
    )
