"""partial_fit: private FTRL over a stream of calls with tree-aggregated noise.

* the tree (:mod:`skdpsco.solvers.tree`): each leaf in ``depth`` released nodes, each prefix sum
  the nodes of its binary decomposition, the noise of every prefix of the planned variance
  (white box, with its power check: halved noise is caught);
* accounting: the stream's event against dp_accounting's ``SingleEpochTreeAggregationDpEvent``
  and the exact Gaussian curve; one charge for the stream, at the first call;
* the estimators: refusals before any charge, refusal beyond the bound, every intermediate model
  usable, ``fit`` ends the stream, scikit-learn's partial_fit checks.
"""

import math
import warnings

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from scipy.stats import chi2
from sklearn.base import clone
from sklearn.utils.estimator_checks import (
    check_estimators_partial_fit_n_features,
    check_fit_score_takes_y,
    check_n_features_in_after_fitting,
    check_param_validation,
)

import skdpsco._noise as noise_draws
from skdpsco import (
    DPHingeSVM,
    DPHuberRegressor,
    DPLogisticRegression,
    DPLpRegression,
    DPPoissonRegressor,
    DPQuantileRegressor,
    PrivacyAccountant,
)
from skdpsco.accounting import epsilon_of, exact_gaussian_epsilon, gaussian_noise_multiplier
from skdpsco.solvers import ftrl, tree
from _audits import check_audit

DELTA = 1e-6
ORDERS = np.linspace(1.5, 64.0, 40)
REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE
REPLACE_SPECIAL = dp_accounting.NeighboringRelation.REPLACE_SPECIAL


# -- the tree ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_leaves", [1, 2, 3, 7, 8, 100, 1000])
def test_each_leaf_is_in_depth_released_nodes_and_each_prefix_sums_its_binary_decomposition(n_leaves, monkeypatch):
    """The sensitivity argument: leaf ``s`` enters the released nodes that contain it, at most
    ``tree_depth`` of them (and exactly that many for leaf 1, which every level's first node holds);
    the prefix of ``t`` leaves is the exact sum plus the noise of ``popcount(t)`` released nodes."""
    released = []  # (level, last leaf) of every released node, with its noise

    def recording(value, scale, rng, draw=None):
        noise = rng.normal(0.0, scale, np.shape(value))
        released.append(noise)
        return noise

    monkeypatch.setattr(noise_draws, "release_noise", recording)
    prefix = tree.TreeNoisePrefix((1,), 1.0, n_leaves, np.random.default_rng(0))
    nodes, leaves = [], np.arange(1, n_leaves + 1, dtype=float)
    for t in range(1, n_leaves + 1):
        before = len(released)
        noisy = prefix.add(np.array([leaves[t - 1]]))
        nodes += [(level, t) for level in range(len(released) - before)]
        assert all(t % 2**level == 0 for level, end in nodes if end == t)
        # the released prefix is the exact one plus the nodes of t's binary decomposition
        parts = [k for k in range(t.bit_length()) if t >> k & 1]
        ends = [(t >> k) << k for k in parts]
        noise = sum(released[nodes.index((k, end))][0] for k, end in zip(parts, ends))
        assert noisy[0] == pytest.approx(leaves[:t].sum() + noise)
        assert len(parts) == tree.prefix_terms(t) <= tree.max_prefix_terms(n_leaves)
    holding = [sum(end - 2**level < s <= end for level, end in nodes) for s in range(1, n_leaves + 1)]
    assert max(holding) == holding[0] == tree.tree_depth(n_leaves) == math.ceil(math.log2(n_leaves + 1))
    assert tree.max_prefix_terms(n_leaves) == max(bin(t).count("1") for t in range(1, n_leaves + 1))
    with pytest.raises(ValueError, match="leaves"):
        prefix.add(np.zeros(1))


def prefix_noise_consistent(samples: np.ndarray, planned_variance: float, level: float = 1e-6) -> bool:
    """Whether ``samples`` (independent draws of one prefix's noise) have the planned variance:
    the two-sided chi-square test of the sum of squares at ``level``."""
    statistic = float(np.sum(samples**2) / planned_variance)
    k = samples.size
    return chi2.ppf(level / 2, k) <= statistic <= chi2.ppf(1 - level / 2, k)


@pytest.mark.parametrize("weakened", [False, True])
def test_the_noise_of_every_released_prefix_has_the_planned_variance(weakened, monkeypatch):
    """White box: with zero leaves the released prefix is its noise; 4000 independent coordinates
    at each of 12 prefixes have variance ``popcount(t) sigma**2``. Its power: the same test on
    noise of half the planned standard deviation fails at every prefix."""
    if weakened:
        drawn = noise_draws.gaussian_noise
        monkeypatch.setattr(noise_draws, "gaussian_noise", lambda rng, std, shape: drawn(rng, std / 2.0, shape))
    sigma, n_leaves = 3.0, 12
    prefix = tree.TreeNoisePrefix((4000,), sigma, n_leaves, np.random.default_rng(1))
    verdicts = [prefix_noise_consistent(prefix.add(np.zeros(4000)), tree.prefix_terms(t) * sigma**2)
                for t in range(1, n_leaves + 1)]
    assert verdicts == [not weakened] * n_leaves


# -- accounting -------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_leaves", [1, 5, 100, 1000])
def test_the_tree_event_is_dp_accountings_tree_aggregation_event(n_leaves):
    """Replace-one with per-node sensitivity ``2 C`` against dp_accounting's replace-special
    ``SingleEpochTreeAggregationDpEvent`` (sensitivity ``C`` of replacing a row by the special
    one, i.e. noise multiplier ``sigma / (2 C)``): the same RDP at every order; and the PLD
    conversion the library uses is the exact Gaussian curve of ``mu = 2 C sqrt(depth) / sigma``."""
    sigma, clip = 7.0, 1.5
    ours = RdpAccountant(ORDERS, REPLACE_ONE).compose(tree.tree_event(sigma, 2 * clip, n_leaves))
    theirs = RdpAccountant(ORDERS, REPLACE_SPECIAL).compose(
        dp_accounting.SingleEpochTreeAggregationDpEvent(sigma / (2 * clip), n_leaves))
    np.testing.assert_allclose(ours._rdp, theirs._rdp, rtol=1e-12)
    mu = 2 * clip * math.sqrt(tree.tree_depth(n_leaves)) / sigma
    assert epsilon_of(tree.tree_event(sigma, 2 * clip, n_leaves), DELTA) == pytest.approx(
        exact_gaussian_epsilon(mu, DELTA), rel=1e-6)
    assert exact_gaussian_epsilon(mu, DELTA) <= theirs.get_epsilon(DELTA)


def binary_data(n, d=5, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w *= 3.0 / np.linalg.norm(w)
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ w))).astype(int)
    return X, y


def stream_model(estimator=DPLogisticRegression, **params):
    settings = dict(epsilon=1.0, delta=DELTA, data_norm=2.0, feature_scaling=None, max_partial_fit_calls=10,
                    random_state=0, accountant=PrivacyAccountant())
    if estimator not in (DPLogisticRegression, DPHingeSVM):
        settings["y_bound"] = 3.0
    return estimator(**{**settings, **params})


@pytest.mark.parametrize("estimator, n_classes", [(DPLogisticRegression, 2), (DPLogisticRegression, 3),
                                                 (DPHingeSVM, 2), (DPHingeSVM, 3), (DPLpRegression, 0)])
def test_one_charge_for_the_stream_at_the_first_call_with_the_planned_noise(estimator, n_classes, monkeypatch):
    """The stream's event is charged once, before the first call reads a row; every later call
    charges nothing. Every noise draw of the stream has the standard deviation of a Gaussian
    release whose ``depth * tasks`` compositions meet (epsilon, delta) exactly, computed here
    from the Gaussian curve, not from the library's plan."""
    scales = []
    release = noise_draws.release_noise

    def recording(value, scale, rng, draw=None):
        scales.append(float(scale))
        return release(value, scale, rng, draw)

    monkeypatch.setattr(noise_draws, "release_noise", recording)
    X, y = binary_data(3000)
    if n_classes == 3:
        y = np.digitize(X[:, 0], np.quantile(X[:, 0], [1 / 3, 2 / 3]))
    if n_classes == 0:
        y = X @ np.ones(X.shape[1])
    model = stream_model(estimator)
    extra = {"classes": np.arange(max(n_classes, 2))} if n_classes else {}
    for call, rows in enumerate(np.array_split(np.arange(3000), 10)):
        model.partial_fit(X[rows], y[rows], **({} if call else extra))
        assert len(model.accountant.history) == 1
    record = model.accountant.history[0]
    assert record.epsilon == model.epsilon_ == pytest.approx(1.0, abs=1e-6) and model.epsilon_ <= 1.0
    assert model.delta_ == DELTA and model.n_partial_fit_calls_ == 10
    tasks = 3 if (estimator is DPHingeSVM and n_classes == 3) else 1
    depth = tree.tree_depth(10)
    assert model.dp_event_ == (tree.tree_event(scales[0], 2 * model.solver_info_["clip_norm"], 10) if tasks == 1
                               else dp_accounting.SelfComposedDpEvent(
                                   tree.tree_event(scales[0], 2 * model.solver_info_["clip_norm"], 10), tasks))
    clip = model.solver_info_["clip_norm"]
    mu = 2 * clip * math.sqrt(depth * tasks) / scales[0]
    assert exact_gaussian_epsilon(mu, DELTA) == pytest.approx(1.0, rel=1e-6)
    assert scales == [scales[0]] * len(scales)
    # every node of every task's tree released once: 10 leaves -> 18 nodes (10 + 5 + 2 + 1)
    assert len(scales) == 18 * tasks
    assert scales[0] == pytest.approx(2 * clip * math.sqrt(depth * tasks) * gaussian_noise_multiplier(1.0, DELTA))


@pytest.mark.parametrize("estimator", [DPLogisticRegression, DPHingeSVM, DPLpRegression])
def test_every_intermediate_model_predicts_and_the_last_one_learns(estimator):
    X, y = binary_data(40000, seed=1)
    X_test, y_test = binary_data(5000, seed=2)
    if estimator is DPLpRegression:
        y, y_test = X @ np.ones(5), X_test @ np.ones(5)
    model = stream_model(estimator)
    for call, rows in enumerate(np.array_split(np.arange(X.shape[0]), 10)):
        model.partial_fit(X[rows], y[rows], **({"classes": [0, 1]} if call == 0 and estimator is not DPLpRegression else {}))
        prediction = model.predict(X_test)
        assert prediction.shape == (X_test.shape[0],) and np.all(np.isfinite(prediction))
    # non-private LogisticRegression: 0.657 on this table; the zero model 0.5 (R^2 0). The
    # regression's public target bound makes its worst-case step small: ten calls go part way
    # (0.07; one call of algorithm='ftrl', 481 steps, 0.31)
    assert model.score(X_test, y_test) > (0.03 if estimator is DPLpRegression else 0.62)


def test_a_call_beyond_the_bound_is_refused_naming_the_parameter_and_leaves_the_stream_as_it_was():
    X, y = binary_data(400)
    model = stream_model(max_partial_fit_calls=2)
    model.partial_fit(X[:200], y[:200], classes=[0, 1])
    model.partial_fit(X[200:], y[200:])
    coef = model.coef_.copy()
    with pytest.raises(ValueError, match="max_partial_fit_calls=2"):
        model.partial_fit(X[:10], y[:10])
    np.testing.assert_array_equal(model.coef_, coef)
    assert model.n_partial_fit_calls_ == 2 and len(model.accountant.history) == 1


@pytest.mark.parametrize("params, message", [
    ({"max_partial_fit_calls": None}, "max_partial_fit_calls"),
    ({"data_norm": None}, "data_norm"),
    ({"data_norm": "private"}, "data_norm"),
    ({"feature_scaling": "standard"}, "feature_scaling"),
    ({"delta": "auto"}, "delta"),
    ({"delta": 0.0}, "delta > 0"),
    ({"delta": 0.01}, "delta"),  # at least 1 / (the first batch's rows)
    ({"algorithm": "noisy_gd"}, "algorithm"),
    ({"class_weight": {0: 1.0}}, "class_weight"),
    ({"solver_options": {"batch_size": 10}}, "steps_per_call"),
    ({"step_scale": 2.0}, "step_scale"),
    ({"secure_noise": True}, "random_state"),  # secure mode refuses a seed
])
def test_bad_settings_are_refused_before_any_charge(params, message):
    X, y = binary_data(200)
    model = stream_model(**params)
    with pytest.raises(ValueError, match=message):
        model.partial_fit(X, y, classes=[0, 1])
    assert model.accountant.history == () and not hasattr(model, "coef_")


@pytest.mark.parametrize("call, message", [
    (lambda m, X, y: m.partial_fit(X, y), "classes must be passed"),
    (lambda m, X, y: m.partial_fit(X, y + 5, classes=[0, 1]), "not in classes"),
    (lambda m, X, y: m.partial_fit(X, y, classes=[0, 1], sample_weight=np.ones(len(y))), "sample_weight"),
    (lambda m, X, y: m.partial_fit(np.where(X > 1, np.nan, X), y, classes=[0, 1]), "NaN"),
])
def test_bad_input_is_refused_before_any_charge(call, message):
    X, y = binary_data(200)
    model = stream_model()
    with pytest.raises(ValueError, match=message):
        call(model, X, y)
    assert model.accountant.history == ()


def test_regressors_need_a_public_target_bound():
    X, y = binary_data(200)
    model = stream_model(DPLpRegression, y_bound="private")
    with pytest.raises(ValueError, match="y_bound"):
        model.partial_fit(X, y.astype(float))
    assert model.accountant.history == ()


def test_fit_ends_the_stream_and_the_next_call_starts_and_charges_a_new_one():
    X, y = binary_data(600)
    model = stream_model(max_partial_fit_calls=2, classes=[0, 1])
    model.partial_fit(X[:200], y[:200], classes=[0, 1])
    model.fit(X[200:400], y[200:400])
    assert not hasattr(model, "n_partial_fit_calls_") and "aggregation" not in model.solver_info_
    assert len(model.accountant.history) == 2
    model.partial_fit(X[400:], y[400:], classes=[0, 1])
    assert model.n_partial_fit_calls_ == 1 and len(model.accountant.history) == 3
    model.partial_fit(X[:10], y[:10])  # the new stream has its own two calls
    with pytest.raises(ValueError, match="max_partial_fit_calls"):
        model.partial_fit(X[:10], y[:10])


def test_later_calls_keep_the_label_set_of_the_first():
    X, y = binary_data(400)
    model = stream_model()
    model.partial_fit(X[:200], y[:200], classes=[0, 1])
    model.partial_fit(X[200:], y[200:], classes=[1, 0])  # the same set
    with pytest.raises(ValueError, match="label set of the first call"):
        model.partial_fit(X[200:], y[200:], classes=[0, 1, 2])
    with pytest.raises(ValueError, match="not in classes"):
        model.partial_fit(X[:10], np.full(10, 2))
    assert model.n_partial_fit_calls_ == 2


def test_a_stream_of_one_call_per_leaf_matches_the_solver_run_directly():
    """The estimator adds no step of its own: its first call is :func:`~skdpsco.solvers.ftrl.stream_steps`
    on the clipped, shuffled rows with the intercept column, from the noise of the same generator."""
    X, y = binary_data(500)
    model = stream_model(fit_intercept=False, data_norm=10.0)
    model.partial_fit(X, y, classes=[0, 1])
    stream = model._stream_
    order_rng, noise_rng = np.random.default_rng(0).spawn(1)[0].spawn(2)  # the seed's root, its first child
    order = order_rng.permutation(500)
    plan, problem = stream.plan, stream.problem
    state = ftrl.StreamState.start(plan, problem.coef_shape)
    w = ftrl.stream_steps(plan, state, X[order], np.where(y[order] == 1, 1.0, -1.0), problem, noise_rng.spawn(1)[0])
    np.testing.assert_allclose(model.coef_.ravel(), w)


# the checks' labels are 0, 1, 2; check_fit_score_takes_y calls partial_fit(X, y) without classes=
CONFIGURED = [stream_model(DPLogisticRegression, classes=[0, 1, 2]), stream_model(DPHingeSVM, classes=[0, 1, 2]),
              stream_model(DPLpRegression),
              stream_model(DPHuberRegressor), stream_model(DPQuantileRegressor), stream_model(DPPoissonRegressor)]


@pytest.mark.parametrize("check", [check_estimators_partial_fit_n_features, check_n_features_in_after_fitting,
                                   check_fit_score_takes_y, check_param_validation])
@pytest.mark.parametrize("estimator", CONFIGURED, ids=lambda e: type(e).__name__)
def test_scikit_learn_partial_fit_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(type(estimator).__name__, clone(estimator).set_params(accountant=PrivacyAccountant(), delta=1e-3))


def plan(smoothness):
    return ftrl.StreamPlan("l2", 2.0, 1.0, 1.0, 1.0, 10, 1, 1.0, 2.0, 3.0, smoothness)


def test_the_steps_never_grow_and_follow_the_regret_bound_or_the_smoothness_bound():
    sizes = np.array([100, 0, 1000, 10])
    steps = plan(math.inf).steps(sizes, 0, 0)
    B, N, cumulative = 2.0, 3.0, np.cumsum(sizes)
    regret = 1.0 / np.sqrt(B**2 * np.cumsum(sizes**2) + B * N * cumulative + N**2)
    np.testing.assert_allclose(steps, np.minimum.accumulate(regret))  # non-smooth: no other bound, never 0
    smooth = plan(0.5).steps(sizes, 0, 0)
    np.testing.assert_allclose(smooth, np.minimum.accumulate(np.minimum(regret, [1 / 50, np.inf, 1 / 500, 1 / 5])))
    assert np.all(np.diff(smooth) <= 0) and np.all(smooth > 0)
    assert plan(0.5).steps(np.array([10]), 1110, 1010100, previous=1e-6)[0] == 1e-6


def test_a_parameter_changed_during_the_stream_is_refused():
    X, y = binary_data(400)
    model = stream_model()
    model.partial_fit(X[:200], y[:200], classes=[0, 1])
    model.set_params(data_norm=4.0)
    with pytest.raises(ValueError, match=r"\['data_norm'\] changed"):
        model.partial_fit(X[200:], y[200:])
    model.set_params(data_norm=2.0).partial_fit(X[200:], y[200:])
    assert model.n_partial_fit_calls_ == 2


def test_sparse_rows_give_the_model_of_the_same_dense_rows():
    import scipy.sparse as sp

    X, y = binary_data(400)
    X[np.abs(X) < 0.3] = 0.0
    dense, sparse = stream_model(), stream_model()
    for rows in np.array_split(np.arange(400), 4):
        dense.partial_fit(X[rows], y[rows], classes=[0, 1])
        sparse.partial_fit(sp.csr_matrix(X[rows]), y[rows], classes=[0, 1])
    np.testing.assert_allclose(sparse.coef_, dense.coef_)
    np.testing.assert_allclose(sparse.intercept_, dense.intercept_)


def test_audit_respects_the_claim_and_catches_the_weakened_noise():
    # benchmarks/audits.py, 'ftrl_stream': both models of a two-call stream, the first call's row
    # flipped; the statistic is the likelihood ratio of the whole release
    check_audit("ftrl_stream")


def test_copies_of_an_unseeded_stream_never_draw_the_same_noise():
    """Two deep copies of a stream after its first call, continued on the same rows, release
    different models: each call draws fresh entropy (the same noise on different rows would
    cancel in the difference of the two releases)."""
    import copy

    X, y = binary_data(400)
    model = stream_model(random_state=None)
    model.partial_fit(X[:200], y[:200], classes=[0, 1])
    one, two = copy.deepcopy(model), copy.deepcopy(model)
    one.partial_fit(X[200:], y[200:])
    two.partial_fit(X[200:], y[200:])
    assert not np.allclose(one.coef_, two.coef_)
    seeded = stream_model(random_state=3)
    seeded.partial_fit(X[:200], y[:200], classes=[0, 1])
    one, two = copy.deepcopy(seeded), copy.deepcopy(seeded)
    one.partial_fit(X[200:], y[200:])
    two.partial_fit(X[200:], y[200:])
    np.testing.assert_array_equal(one.coef_, two.coef_)  # a seed is for reproducible experiments only


def test_a_stream_runs_in_secure_mode():
    X, y = binary_data(400)
    model = stream_model(random_state=None, secure_noise=True)
    model.partial_fit(X[:200], y[:200], classes=[0, 1])
    model.partial_fit(X[200:], y[200:])
    assert np.all(np.isfinite(model.coef_)) and len(model.accountant.history) == 1


@pytest.mark.parametrize("constraint, p", [("l1", None), ("lp", 1.5)])
def test_a_stream_runs_in_the_other_geometries_within_their_ball(constraint, p):
    X, y = binary_data(2000)
    model = stream_model(constraint=constraint, constraint_p=p, radius=3.0)
    for call, rows in enumerate(np.array_split(np.arange(2000), 4)):
        model.partial_fit(X[rows], y[rows], classes=[0, 1])
        w = np.append(model.coef_.ravel(), model.intercept_ / 2.0)  # the solver's intercept column is data_norm
        assert np.linalg.norm(w, 1 if constraint == "l1" else 1.5) <= 3.0 * (1 + 1e-9)
    assert model.solver_info_["p"] == (2.0 if p is None else 1.5)
