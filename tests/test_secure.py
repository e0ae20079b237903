"""Secure mode (issue 17): the OS-CSPRNG bit generator, the refusal of seeds, the exact discrete
samplers (CKS20), the grid releases and their accounting, and a privacy audit with it on."""

import math
import os
import pickle
import threading
import warnings

import dp_accounting
import numpy as np
import pytest
from scipy import stats

import skdpsco
from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, DPSearchCV, DPStandardScaler, PrivacyAccountant
from skdpsco import _noise, _secure
from skdpsco._osrandom import OSRandom
from skdpsco.accounting import FailureProbabilityDpEvent, epsilon_of, gaussian_event, pure_dp_event, zcdp_event
from skdpsco.linear_model import PrivacyWarning
from skdpsco.location import inverse_sensitivity_location


@pytest.fixture
def secure_mode():
    with skdpsco.config_context(secure_noise=True):
        yield


def _rows(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X @ np.arange(1, d + 1) > 0).astype(int)


# -- configuration ------------------------------------------------------------------------------
def test_config_context_holds_secure_noise_through_nesting_and_exceptions():
    assert skdpsco.get_config() == {"secure_noise": False}
    with skdpsco.config_context(secure_noise=True):
        assert skdpsco.get_config()["secure_noise"] is True
        with pytest.raises(RuntimeError, match="boom"):
            with skdpsco.config_context(secure_noise=True):
                raise RuntimeError("boom")
        assert skdpsco.get_config()["secure_noise"] is True  # the inner block released its own hold only
    assert skdpsco.get_config()["secure_noise"] is False
    with pytest.raises(RuntimeError, match="boom"):
        with skdpsco.config_context(secure_noise=True):
            raise RuntimeError("boom")
    assert skdpsco.get_config()["secure_noise"] is False
    with skdpsco.config_context(secure_noise=False):  # off already: nothing to switch off
        assert skdpsco.get_config()["secure_noise"] is False
    skdpsco.set_config(secure_noise=True)
    try:
        assert _secure.secure_mode()
        with skdpsco.config_context(secure_noise=True):
            pass
        assert _secure.secure_mode()  # the block's exit does not end set_config's hold
    finally:
        skdpsco.set_config(secure_noise=False)
    assert skdpsco.get_config()["secure_noise"] is False
    with pytest.raises(ValueError, match="secure_noise"):
        skdpsco.set_config(secure_noise="yes")
    with pytest.raises(ValueError, match="secure_noise"):
        with skdpsco.config_context(secure_noise=1):
            pass


def _in_thread(target):
    """Start ``target`` in a thread; its exception, if any, is kept in the returned list."""
    errors = []

    def run():
        try:
            target()
        except BaseException as error:  # re-raised by the test in the main thread
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def test_a_block_keeps_secure_mode_when_another_threads_block_exits_first():
    """Thread A enters a secure block, thread B enters one, A exits: B's fits stay in secure mode
    (a saved-and-restored value would have restored A's "off" under B's block)."""
    from skdpsco.linear_model._base import _generator

    X, y = _rows(n=200)
    a_entered, b_entered, a_exited = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def thread_a():
        with skdpsco.config_context(secure_noise=True):
            a_entered.set()
            assert b_entered.wait(10)
        a_exited.set()

    def thread_b():
        assert a_entered.wait(10)
        with skdpsco.config_context(secure_noise=True):
            b_entered.set()
            assert a_exited.wait(10)
            seen["config"] = skdpsco.get_config()["secure_noise"]
            seen["generator"] = _secure.is_secure(_generator(None))
            with pytest.raises(ValueError, match="random_state=0 is refused in secure mode"):
                DPLpRegression(random_state=0, accountant=PrivacyAccountant()).fit(X, y)
            model = DPLpRegression(accountant=PrivacyAccountant()).fit(X, y)
            seen["zcdp"] = "ZCDpEvent" in repr(model.dp_event_)

    (a, a_errors), (b, b_errors) = _in_thread(thread_a), _in_thread(thread_b)
    a.join(60)
    b.join(60)
    assert not a_errors and not b_errors, a_errors + b_errors
    assert seen == {"config": True, "generator": True, "zcdp": True}
    assert skdpsco.get_config()["secure_noise"] is False  # both blocks closed


def test_switching_secure_mode_off_while_it_is_held_is_refused():
    holding, done = threading.Event(), threading.Event()

    def hold():
        with skdpsco.config_context(secure_noise=True):
            holding.set()
            assert done.wait(10)

    thread, errors = _in_thread(hold)
    assert holding.wait(10)
    try:
        with pytest.raises(RuntimeError, match=r"set_config\(secure_noise=False\) is refused: .*1 open config_context"):
            skdpsco.set_config(secure_noise=False)
        with pytest.raises(RuntimeError, match=r"config_context\(secure_noise=False\) is refused"):
            with skdpsco.config_context(secure_noise=False):
                pass
        assert skdpsco.get_config()["secure_noise"] is True
    finally:
        done.set()
        thread.join(10)
    assert not errors
    assert skdpsco.get_config()["secure_noise"] is False
    skdpsco.set_config(secure_noise=True)
    try:  # set_config's hold: a block cannot switch it off for its thread only
        with pytest.raises(RuntimeError, match=r"held on by skdpsco.set_config\(secure_noise=True\)\. "):
            with skdpsco.config_context(secure_noise=False):
                pass
        assert skdpsco.get_config()["secure_noise"] is True
    finally:
        skdpsco.set_config(secure_noise=False)  # no block open: the explicit switch takes effect
    assert skdpsco.get_config()["secure_noise"] is False


# -- the bit generator --------------------------------------------------------------------------
def test_osrandom_has_no_state_and_copies_are_fresh_streams():
    rng = _secure.secure_generator()
    with pytest.raises(TypeError, match="no state"):
        rng.bit_generator.state
    copy = pickle.loads(pickle.dumps(rng))
    assert isinstance(copy.bit_generator, OSRandom)
    a, b = rng.random(8), copy.random(8)
    assert not np.array_equal(a, b)
    children = rng.spawn(2)
    assert all(isinstance(c.bit_generator, OSRandom) for c in children)
    assert not np.array_equal(children[0].random(8), children[1].random(8))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_osrandom_forked_child_does_not_repeat_the_parents_words():
    rng = _secure.secure_generator()
    rng.random()  # a block is buffered: a seeded or buffered stream would continue in the child
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.write(write, rng.random(4).tobytes())
        os._exit(0)
    os.waitpid(pid, 0)
    child = np.frombuffer(os.read(read, 32))
    assert not np.array_equal(child, rng.random(4))


def test_secure_draws_have_the_right_distributions():
    rng = _secure.secure_generator()
    assert stats.kstest(rng.random(20_000), "uniform").pvalue > 1e-4
    assert stats.kstest(_noise.gaussian_noise(rng, 2.0, (20_000,)), "norm", args=(0.0, 2.0)).pvalue > 1e-4
    assert stats.kstest(_noise.laplace_noise(rng, 0.5, (20_000,)), "laplace", args=(0.0, 0.5)).pvalue > 1e-4


# -- seeds refused, noise not reproducible ------------------------------------------------------
@pytest.mark.parametrize(
    "fit",
    [
        lambda X, y: DPLogisticRegression(classes=[0, 1], random_state=0).fit(X, y),
        lambda X, y: DPStandardScaler(feature_bounds=(-3.0, 3.0), random_state=np.random.RandomState(0)).fit(X),
        lambda X, y: DPSearchCV(DPLogisticRegression(classes=[0, 1]), {"alpha": [0.0, 0.1]}, random_state=1).fit(X, y),
        lambda X, y: inverse_sensitivity_location(X[:, 0], 1.0, (-3.0, 3.0), random_state=np.random.default_rng(0)),
    ],
)
def test_secure_mode_refuses_a_seed(secure_mode, fit):
    X, y = _rows()
    accountant = PrivacyAccountant()
    skdpsco.set_accountant(accountant)
    try:
        with pytest.raises(ValueError, match=r"random_state=.* refused in secure mode"):
            fit(X, y)
    finally:
        skdpsco.set_accountant(PrivacyAccountant())
    assert not accountant.history  # refused before anything is charged


def test_secure_fits_are_not_reproducible_and_draw_from_the_os(secure_mode, monkeypatch):
    X, y = _rows()
    generators = []
    draw = _noise.gaussian_noise
    monkeypatch.setattr(_noise, "gaussian_noise", lambda rng, std, shape: generators.append(rng) or draw(rng, std, shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        first = DPLogisticRegression(classes=[0, 1]).fit(X, y)
        second = DPLogisticRegression(classes=[0, 1]).fit(X, y)
    assert first.algorithm_ == "noisy_gd"  # the compiled loop takes its noise from gaussian_noise
    assert generators and all(_secure.is_secure(rng) for rng in generators)
    assert not np.array_equal(first.coef_, second.coef_)
    assert first.epsilon_ <= 1.0


# -- the exact samplers (CKS20 Algorithms 1-3) --------------------------------------------------
def _chi_square_pvalue(draws, support, pmf):
    draws = np.asarray(draws, dtype=np.int64)
    observed = np.array([(draws == k).sum() for k in support] + [(~np.isin(draws, support)).sum()])
    expected = np.append(pmf, max(1.0 - pmf.sum(), 0.0)) * draws.size
    keep = expected > 5
    observed = np.append(observed[keep], observed[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    keep = expected > 0
    return stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()).pvalue


@pytest.mark.parametrize("sigma", [0.6, 1.5, 4.0])
def test_discrete_gaussian_matches_its_pmf(sigma):
    draws = _secure.discrete_gaussian_noise(np.random.default_rng(3), sigma, (20_000,))
    support = np.arange(-int(8 * sigma) - 2, int(8 * sigma) + 3)
    weights = np.exp(-support.astype(float) ** 2 / (2 * sigma**2))
    assert _chi_square_pvalue(draws, support, weights / weights.sum()) > 1e-4


def test_discrete_gaussian_chi_square_catches_a_wrong_sigma():
    draws = _secure.discrete_gaussian_noise(np.random.default_rng(3), 1.5 * 1.1, (20_000,))
    support = np.arange(-14, 15)
    weights = np.exp(-support.astype(float) ** 2 / (2 * 1.5**2))
    assert _chi_square_pvalue(draws, support, weights / weights.sum()) < 1e-4


@pytest.mark.parametrize("scale", [0.7, 3.0])
def test_discrete_laplace_matches_its_pmf(scale):
    draws = _secure.discrete_laplace_noise(np.random.default_rng(4), scale, (20_000,))
    support = np.arange(-int(12 * scale) - 2, int(12 * scale) + 3)
    weights = np.exp(-np.abs(support) / scale)
    assert _chi_square_pvalue(draws, support, weights / weights.sum()) > 1e-4


def test_bernoulli_exp_is_exact_on_both_branches():
    bits = _secure._Bits(np.random.default_rng(5))
    for numerator, denominator in [(1, 3), (1, 1), (7, 2)]:
        hits = sum(_secure._bernoulli_exp(bits, numerator, denominator) for _ in range(40_000))
        p = math.exp(-numerator / denominator)
        assert abs(hits / 40_000 - p) < 5 * math.sqrt(p * (1 - p) / 40_000)


# -- the grid release and its accounting --------------------------------------------------------
@pytest.mark.parametrize("laplace", [False, True])
@pytest.mark.parametrize("sensitivity, sigma, d", [(1.0, 3.0, 1), (2.0, 0.05, 7), (math.sqrt(2.0), 40.0, 81)])
def test_grid_release_meets_the_planned_guarantee(laplace, sensitivity, sigma, d):
    """The integer query's sensitivity ``Delta / gamma + sqrt(d)`` (``+ d`` in l1) over the
    discrete noise scale is at most the planned ``Delta / sigma``."""
    gamma = _secure._grid_step(sensitivity, d if laplace else math.sqrt(d))
    assert math.log2(gamma) == int(math.log2(gamma))
    noise = sigma * (1.0 + 2.0**-_secure.GRID_BITS) / gamma
    integer_sensitivity = sensitivity / gamma + (d if laplace else math.sqrt(d))
    assert integer_sensitivity / noise <= sensitivity / sigma


def test_grid_release_is_on_the_grid_and_blind_to_the_values_low_bits():
    value = np.array([0.3, -1.7, 12.25])
    sensitivity, sigma = 1.0, 0.5
    gamma = _secure._grid_step(sensitivity, math.sqrt(value.size))
    released = _secure.grid_release(value, sigma, sensitivity, np.random.default_rng(6))
    steps = released / gamma
    np.testing.assert_array_equal(steps, np.round(steps))
    # a value that differs below the grid (same rounding) gives the same release for the same bits:
    # nothing of the value's low-order bits reaches the output (Mironov 2012's attack reads them)
    nudged = value + gamma * np.array([0.1, -0.2, 0.3])
    np.testing.assert_array_equal(_secure.grid_release(nudged, sigma, sensitivity, np.random.default_rng(6)), released)
    assert np.std(_secure.grid_release(np.zeros(20_000), sigma, sensitivity, np.random.default_rng(7))) == pytest.approx(
        sigma, rel=0.03
    )


def test_noisy_release_outside_secure_mode_is_the_old_release():
    value = np.array([1.0, 2.0])
    np.testing.assert_array_equal(
        _secure.noisy_release(value, 0.3, np.random.default_rng(8), sensitivity=1.0),
        value + _noise.release_noise(value, 0.3, np.random.default_rng(8)),
    )


def test_secure_event_is_zcdp_of_the_same_rho():
    z = 2.5
    event = dp_accounting.ComposedDpEvent([
        gaussian_event(z, 1.0), dp_accounting.SelfComposedDpEvent(gaussian_event(2 * z, 1.0), 3), pure_dp_event(0.5),
    ])
    converted = _secure.secure_event(event)
    assert converted.events[0] == zcdp_event(1 / (2 * z**2))
    assert converted.events[1] == dp_accounting.SelfComposedDpEvent(zcdp_event(1 / (8 * z**2)), 3)
    assert converted.events[2] == pure_dp_event(0.5)
    # the zCDP reading is never tighter than the continuous Gaussian's exact curve
    assert epsilon_of(converted, 1e-6) >= epsilon_of(event, 1e-6)


@pytest.mark.parametrize("kwargs", [
    {},  # default: feature scaling (grid releases) + noisy GD
    {"algorithm": "output_perturbation", "feature_scaling": None, "data_norm": 3.0},  # a grid solver alone
    {"algorithm": "localization", "feature_scaling": None, "data_norm": 3.0, "delta": 0.0},  # discrete Laplace
])
def test_secure_fits_account_their_grid_releases_within_the_budget(secure_mode, kwargs):
    X, y = _rows(n=600)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        model = DPLogisticRegression(classes=[0, 1], epsilon=1.0, accountant=PrivacyAccountant(), **kwargs).fit(X, y)
    assert model.epsilon_ <= 1.0
    leaves = []

    def collect(event):
        if isinstance(event, dp_accounting.ComposedDpEvent):
            for part in event.events:
                collect(part)
        elif isinstance(event, (dp_accounting.SelfComposedDpEvent, FailureProbabilityDpEvent)):
            collect(event.event)
        else:
            leaves.append(type(event).__name__)

    collect(model.dp_event_)
    if kwargs.get("delta") == 0.0:
        assert set(leaves) == {"RandomizedResponseDpEvent"}  # the discrete Laplace meets the planned pure epsilon
    else:
        assert "ZCDpEvent" in leaves  # the grid releases: zCDP, not the Gaussian PLD
        assert model.epsilon_ >= 0.99  # the calibration spends the budget under that accounting


def test_secure_scaler_and_search_fit(secure_mode):
    X, y = _rows(n=300)
    scaler = DPStandardScaler(feature_bounds=(-3.0, 3.0), accountant=PrivacyAccountant()).fit(X)
    assert scaler.epsilon_ <= 1.0 and isinstance(scaler.dp_event_, dp_accounting.SelfComposedDpEvent)
    assert isinstance(scaler.dp_event_.event, dp_accounting.ZCDpEvent)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        search = DPSearchCV(DPLogisticRegression(classes=[0, 1]), {"alpha": [0.0, 0.1]}, n_iter=2.0,
                            accountant=PrivacyAccountant()).fit(X, y)
    assert search.best_estimator_.random_state is None


# -- black-box audit with secure mode on --------------------------------------------------------
@pytest.mark.slow
def test_scaler_audit_passes_in_secure_mode():
    from tests._audits import check_audit

    check_audit("scaler_secure")


@pytest.mark.parametrize("estimator, stem", [("logistic", "secure"), ("least_squares", "secure_least_squares")])
def test_secure_benchmark_harness_writes_the_ratio(tmp_path, estimator, stem):
    from benchmarks import secure as bench

    (row,) = bench.main(["--sizes", "3000x3", "--repeats", "1", "--estimator", estimator, "--out", str(tmp_path)])
    assert row["ratio"] == pytest.approx(row["secure"]["fit_s"] / row["default"]["fit_s"])
    assert row["secure"]["epsilon"] <= 1.0 and row["default"]["epsilon"] <= 1.0
    lines = [line for line in (tmp_path / f"{stem}.md").read_text().splitlines() if line.startswith("| 3e+03")]
    assert len(lines) == 1 and f"{row['ratio']:.2f}x" in lines[0]


@pytest.mark.parametrize("make", [
    lambda **kw: DPLogisticRegression(classes=[0, 1], **kw),
    lambda **kw: DPHingeSVM(classes=[0, 1], **kw),
    lambda **kw: DPLpRegression(**kw),
    lambda **kw: DPStandardScaler(feature_bounds=(-3.0, 3.0), **kw),
])
def test_estimator_parameter_overrides_the_global_configuration(make):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), np.arange(200) % 2

    def fit(model):
        return model.fit(X) if isinstance(model, DPStandardScaler) else model.fit(X, y)

    # on for this estimator while the global setting is off: the seed is refused before any charge
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match="random_state=0 is refused in secure mode"):
        fit(make(secure_noise=True, random_state=0, accountant=ledger))
    assert not ledger.history
    # off for this estimator while the global setting is on: reproducible with a seed
    with skdpsco.config_context(secure_noise=True):
        first, again = (fit(make(secure_noise=False, random_state=3, accountant=PrivacyAccountant())) for _ in range(2))
    attribute = "mean_" if isinstance(first, DPStandardScaler) else "coef_"
    np.testing.assert_array_equal(getattr(first, attribute), getattr(again, attribute))
    # None follows the global setting
    with skdpsco.config_context(secure_noise=True), pytest.raises(ValueError, match="secure mode"):
        fit(make(random_state=0, accountant=PrivacyAccountant()))


# -- the Newton solver's releases (least squares' default, logistic Newton) ------------------------------
def _regression(n=2000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ np.array([1.0, -0.5, 0.25])[:d] + 0.3 * rng.normal(size=n)


NEWTON_FITS = {
    "DPLpRegression()": (lambda **kw: DPLpRegression(epsilon=5.0, **kw), _regression, 1, 1),
    "DPLogisticRegression(algorithm='newton')": (
        lambda **kw: DPLogisticRegression(classes=[0, 1], algorithm="newton", feature_scaling=None, data_norm=3.0, **kw),
        _rows, 8, 6,
    ),
}


def _observe_newton_releases(monkeypatch):
    """Record ``(value shape, scale, sensitivity, its discrete draws)`` of every release of the
    Newton solver (:func:`skdpsco._secure.noisy_release` as newton.py calls it), the discrete
    Gaussian draws with the security of their generator, and fail on any call of
    ``release_noise``, the floating-point release."""
    from skdpsco.solvers import newton

    draws, releases = [], []
    draw, release_value = _secure.discrete_gaussian_noise, newton.noisy_release

    def observed_draw(rng, std, shape):
        draws.append((shape, _secure.is_secure(rng)))
        return draw(rng, std, shape)

    def observed_release(value, scale, rng, *, sensitivity, release):
        before = len(draws)
        released = release_value(value, scale, rng, sensitivity=sensitivity, release=release)
        releases.append((np.shape(value), scale, sensitivity, draws[before:]))
        return released

    def floating_point_release(*args, **kwargs):
        raise AssertionError("release_noise (a floating-point release) was called in secure mode")

    monkeypatch.setattr(_secure, "discrete_gaussian_noise", observed_draw)
    monkeypatch.setattr(newton, "noisy_release", observed_release)
    monkeypatch.setattr(newton, "release_noise", floating_point_release)
    return releases


@pytest.mark.parametrize("name", NEWTON_FITS)
def test_secure_newton_releases_every_gradient_and_hessian_on_the_grid(secure_mode, monkeypatch, name):
    make, data, n_steps, hessian_steps = NEWTON_FITS[name]
    X, y = data()
    releases = _observe_newton_releases(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        model = make(accountant=PrivacyAccountant()).fit(X, y)
    assert model.algorithm_ == "newton"
    p = X.shape[1] + 1  # the intercept column
    shapes = [shape for shape, *_ in releases]
    assert shapes.count((p,)) == n_steps and shapes.count((p * (p + 1) // 2,)) == hessian_steps
    assert len(releases) == n_steps + hessian_steps
    # each release is one discrete Gaussian draw of the whole vector, from the OS's generator
    assert all(draws == [(shape, True)] for shape, _, _, draws in releases)
    # the event charged is the zCDP form, with the rho of each release as drawn (sensitivity, scale)
    # (the default regression's event composes its scaling releases with the solver's, last)
    rhos = sorted(sensitivity**2 / (2 * scale**2) for _, scale, sensitivity, _ in releases)
    solver_event = model.dp_event_.events[-1] if isinstance(model, DPLpRegression) else model.dp_event_
    assert all(isinstance(part, dp_accounting.ZCDpEvent) for part in solver_event.events)
    np.testing.assert_allclose(sorted(part.rho for part in solver_event.events), rhos, rtol=1e-12)
    assert "GaussianDpEvent" not in repr(model.dp_event_)
    assert model.epsilon_ <= model.epsilon


def test_secure_least_squares_is_as_accurate_as_outside_secure_mode():
    # both 0.806 over 10 fits each (the defaults' clipping costs the rest of the oracle's 0.94)
    X, y = _regression(n=5000, seed=1)
    X_test, y_test = _regression(n=5000, seed=2)
    scores = {}
    for secure in (False, True):
        with skdpsco.config_context(secure_noise=secure):
            model = DPLpRegression(epsilon=5.0, accountant=PrivacyAccountant()).fit(X, y)
        scores[secure] = model.score(X_test, y_test)
    assert scores[True] > 0.75 and abs(scores[True] - scores[False]) < 0.01


@pytest.mark.parametrize("name", NEWTON_FITS)
def test_newton_outside_secure_mode_is_the_floating_point_release_bit_for_bit(monkeypatch, name):
    """Outside secure mode ``noisy_release`` is ``value + release_noise(...)``, the solver's
    release before the grid: the same seeded fit through either gives the same model, bit for bit."""
    from skdpsco.solvers import newton

    make, data, *_ = NEWTON_FITS[name]
    X, y = data()

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            return make(random_state=7, accountant=PrivacyAccountant()).fit(X, y)

    model = fit()
    monkeypatch.setattr(newton, "noisy_release", lambda value, scale, rng, *, sensitivity, release:
                        value + newton.release_noise(value, scale, rng))
    before = fit()
    np.testing.assert_array_equal(model.coef_, before.coef_)
    np.testing.assert_array_equal(model.intercept_, before.intercept_)
    assert model.dp_event_ == before.dp_event_
