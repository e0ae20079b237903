"""DPPCA: the second-moment sensitivity, the calibration and the one event per fit, errors before
any charge, utility against PCA, scikit-learn's checks, pipelines, and the released matrix's value
and noise (its sensitivity audit, with the harness's other estimators, is tests/test_whitebox.py)."""

import math

import dp_accounting
import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import skdpsco
from skdpsco import DPPCA, DPLogisticRegression, PrivacyAccountant
from skdpsco.accounting import epsilon_of, gaussian_noise_multiplier
from skdpsco.decomposition import second_moment_sensitivity, symmetric_from_upper, upper_triangle
from skdpsco.linear_model import _bounds, _scaling
from benchmarks import whitebox as wb


def _shift(x, y):
    """``||upper(x x^T - y y^T)||_2``: the move of the released coordinates when ``x`` replaces ``y``."""
    return np.linalg.norm(upper_triangle(np.outer(x, x) - np.outer(y, y)))


def test_sensitivity_is_attained_by_orthogonal_axis_rows_and_never_exceeded():
    C = 1.7
    e1, e2 = np.eye(3)[0] * C, np.eye(3)[1] * C
    assert _shift(e1, e2) == pytest.approx(second_moment_sensitivity(C))
    assert second_moment_sensitivity(C) == pytest.approx(math.sqrt(2) * C**2)
    # the add/remove bound C**2 is exceeded under replace-one, the triangle bound 2 C**2 is loose
    assert C**2 < _shift(e1, e2) < 2 * C**2
    rng = np.random.default_rng(0)
    worst = 0.0
    for d in (1, 2, 5, 20):
        for _ in range(2000):
            x, y = rng.normal(size=(2, d)) * rng.exponential(size=(2, 1))
            x, y = (v * C / max(np.linalg.norm(v), C) for v in (x, y))  # rows clipped to C
            worst = max(worst, _shift(x, y))
        # orthogonal pairs of norm C in rotated directions: the Frobenius part is attained, the
        # upper triangle counts an off-diagonal entry once, so it moves less
        q, _ = np.linalg.qr(rng.normal(size=(d, d)))
        if d > 1:
            assert _shift(C * q[:, 0], C * q[:, 1]) <= second_moment_sensitivity(C) + 1e-12
    assert worst <= second_moment_sensitivity(C) + 1e-12
    # antipodal rows cancel (x x^T = y y^T), a row against zero moves it by C**2
    assert _shift(e1, -e1) == 0.0 and _shift(e1, 0 * e1) == pytest.approx(C**2)


def test_upper_triangle_round_trip():
    matrix = np.random.default_rng(1).normal(size=(4, 4))
    matrix = matrix + matrix.T
    assert np.array_equal(symmetric_from_upper(upper_triangle(matrix), 4), matrix)
    assert upper_triangle(matrix).size == 10


def _low_rank(n=4000, d=12, rank=2, seed=0):
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(d, rank)))
    X = rng.normal(size=(n, rank)) * [3.0, 2.0][:rank] @ basis.T + 0.1 * rng.normal(size=(n, d)) + 5.0
    return X, basis


@pytest.mark.parametrize("options", [{}, {"data_norm": 30.0}, {"feature_scaling": None, "data_norm": 30.0}])
def test_components_near_pca_at_large_epsilon(options):
    X, basis = _low_rank()
    model = DPPCA(2, epsilon=1e3, random_state=0, accountant=PrivacyAccountant(), **options).fit(X)
    exact = PCA(2).fit(X)
    # the principal angles between the released and the true subspaces are small
    cosines = np.linalg.svd(model.components_ @ exact.components_.T, compute_uv=False)
    assert cosines.min() > 0.99
    assert np.allclose(model.mean_, X.mean(axis=0), atol=0.05)
    assert np.allclose(np.abs(model.components_ @ basis), np.abs(exact.components_ @ basis), atol=0.05)
    assert model.explained_variance_ratio_.sum() <= 1.0
    # the clip of the scaled rows shrinks the leading eigenvalues somewhat (DPPCA Notes)
    assert np.allclose(model.explained_variance_ratio_, exact.explained_variance_ratio_, atol=0.06)


def test_small_epsilon_loses_the_subspace():
    """The utility test can fail: at a tiny budget the noise drowns the low-rank signal."""
    X, _ = _low_rank(n=200)
    exact = PCA(2).fit(X)
    model = DPPCA(2, epsilon=0.01, delta=1e-3, random_state=0, accountant=PrivacyAccountant()).fit(X)
    assert np.linalg.svd(model.components_ @ exact.components_.T, compute_uv=False).min() < 0.9


def test_one_event_composes_the_releases_and_meets_the_budget():
    X, _ = _low_rank(n=3000)
    ledger = PrivacyAccountant()
    model = DPPCA(2, epsilon=1.0, delta=1e-6, random_state=0, accountant=ledger).fit(X)
    assert [record.estimator for record in ledger.history] == ["DPPCA"]
    record = ledger.history[0]
    assert record.event == model.dp_event_ and record.epsilon == model.epsilon_
    assert model.epsilon_ <= 1.0 and model.epsilon_ == pytest.approx(1.0, rel=1e-3)
    assert epsilon_of(model.dp_event_, 1e-6) == pytest.approx(model.epsilon_)
    bound, scaling, gauss = model.dp_event_.events
    # the shares of mu**2 (mu-GDP): row bound, scaling moments (sensitivities 2 and sqrt 2), matrix
    mu = 1.0 / gaussian_noise_multiplier(1.0, 1e-6)
    bound_share = _bounds.row_bound_share(3000, gaussian_mu=mu)
    moments = [1.0 / event.noise_multiplier**2 for event in scaling.events]
    assert 1.0 / bound.noise_multiplier**2 == pytest.approx(bound_share * mu**2)
    assert sum(moments) == pytest.approx(_scaling.SCALING_SHARE * mu**2)
    assert 1.0 / gauss.noise_multiplier**2 == pytest.approx((1 - bound_share - _scaling.SCALING_SHARE) * mu**2)
    assert model.noise_std_ == pytest.approx(gauss.noise_multiplier * math.sqrt(2.0))


@pytest.mark.parametrize("options, count", [
    ({"data_norm": 40.0}, 2), ({"feature_scaling": None, "data_norm": 40.0}, 2),
    ({"feature_scaling": None, "data_norm": 40.0, "centering": "none"}, 1),
])
def test_events_without_the_private_bound(options, count):
    X, _ = _low_rank(n=1000)
    model = DPPCA(epsilon=2.0, random_state=0, accountant=PrivacyAccountant(), **options).fit(X)
    event = model.dp_event_
    assert (len(event.events) if isinstance(event, dp_accounting.ComposedDpEvent) else 1) == count
    assert model.epsilon_ == pytest.approx(2.0, rel=1e-3)
    if options.get("centering") == "none":
        assert np.array_equal(model.mean_, np.zeros(X.shape[1]))


def test_ledger_charged_once_per_fit():
    X, _ = _low_rank(n=500)
    ledger = PrivacyAccountant()
    model = DPPCA(2, epsilon=0.5, accountant=ledger)
    model.fit(X)
    model.fit_transform(X)
    assert len(ledger.history) == 2
    assert ledger.spent(model.delta_)[0] == pytest.approx(epsilon_of(
        dp_accounting.ComposedDpEvent([model.dp_event_, model.dp_event_]), model.delta_), rel=1e-6)


@pytest.mark.parametrize("params, message", [
    ({"n_components": 13}, "n_components=13 exceeds n_features=12"),
    ({"feature_scaling": None}, "feature_scaling=None needs data_norm"),
    ({"delta": 0.5}, "delta"),
    ({"epsilon": -1.0}, "epsilon"),
    ({"centering": "mean"}, "centering"),
])
def test_bad_parameters_refused_before_any_charge(params, message):
    X, _ = _low_rank(n=100)
    ledger = PrivacyAccountant()
    with pytest.raises(ValueError, match=message):
        DPPCA(accountant=ledger, **params).fit(X)
    assert ledger.history == ()


def test_transform_inverse_and_whiten_as_pca():
    X, _ = _low_rank(n=800)
    model = DPPCA(epsilon=5.0, random_state=0, accountant=PrivacyAccountant()).fit(X)
    projected = model.transform(X)
    assert np.allclose(projected, (X - model.mean_) @ model.components_.T)
    assert np.allclose(model.inverse_transform(projected), X)  # all components: a rotation
    assert np.allclose(model.components_ @ model.components_.T, np.eye(X.shape[1]))
    assert model.singular_values_ == pytest.approx(np.sqrt(model.explained_variance_ * (len(X) - 1)))
    white = DPPCA(2, whiten=True, epsilon=5.0, random_state=0, accountant=PrivacyAccountant()).fit(X)
    assert np.allclose(white.transform(X) * np.sqrt(white.explained_variance_), projected[:, :2])
    assert list(white.get_feature_names_out()) == ["dppca0", "dppca1"]


def test_secure_mode_releases_on_a_grid_with_zcdp_events():
    X, _ = _low_rank(n=1000)
    with skdpsco.config_context(secure_noise=True):
        model = DPPCA(2, epsilon=1.0, accountant=PrivacyAccountant()).fit(X)
    assert isinstance(model.dp_event_.events[-1], dp_accounting.ZCDpEvent)
    assert model.epsilon_ <= 1.0


def test_pipeline_with_logistic_regression_on_digits():
    X, y = load_digits(return_X_y=True)
    ledger = PrivacyAccountant()
    pipeline = make_pipeline(
        DPPCA(16, epsilon=2.0, random_state=0, accountant=ledger),
        DPLogisticRegression(epsilon=2.0, classes=np.arange(10), random_state=0, accountant=ledger),
    ).fit(X[:1400], y[:1400])
    assert pipeline.score(X[1400:], y[1400:]) > 0.5  # chance is 0.1
    assert [record.estimator for record in ledger.history] == ["DPPCA", "DPLogisticRegression"]
    events = [record.event for record in ledger.history]
    delta = pipeline[-1].delta_
    assert ledger.spent(delta)[0] == pytest.approx(epsilon_of(dp_accounting.ComposedDpEvent(events), delta))


# -- white-box audit of the matrix release ---------------------------------------------------------
# Every path's releases against their claims, at the worst neighbours, and the mutations that must be
# caught: tests/test_whitebox.py on the cases of benchmarks.whitebox.pca_cases. Here, what that
# harness does not check: the released value itself and the law of its noise.
def test_whitebox_release_is_the_clean_matrix_plus_the_planned_noise():
    """Public ``data_norm``, no centring: the released value is exactly the upper triangle of
    ``Z^T Z`` for ``Z`` the rows clipped to ``B`` over ``B``, and the released matrix minus it has
    the planned standard deviation; with the noise halved the same statistic fails."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 30)) * 0.5
    B = 3.0
    Z = X * (B / np.maximum(np.linalg.norm(X, axis=1), B))[:, None] / B

    def statistic(noise_factor):
        with wb.observed_scaled(noise_factor=noise_factor) as observation:
            model = DPPCA(epsilon=1.0, delta=1e-5, random_state=0, accountant=PrivacyAccountant(),
                          feature_scaling=None, data_norm=B, centering="none").fit(X)
        release, = observation.releases
        assert np.allclose(release.value, upper_triangle(Z.T @ Z))
        assert release.scale == pytest.approx(noise_factor * model.noise_std_)
        residual = upper_triangle(symmetric_from_upper(release.released, 30) - Z.T @ Z)  # 465 coordinates
        return np.std(residual) / model.noise_std_

    # the sample standard deviation of 465 normals: relative standard error 1 / sqrt(930) = 0.033
    assert 0.9 < statistic(1.0) < 1.1
    assert not 0.9 < statistic(0.5) < 1.1


# -- scikit-learn's checks ------------------------------------------------------------------------
@parametrize_with_checks(
    [DPPCA(), DPPCA(n_components=2), DPPCA(n_components=1, whiten=True),
     DPPCA(feature_scaling=None, data_norm=5.0, centering="none")],
    xfail_strict=True,
)
def test_scikit_learn_estimator_checks(estimator, check):
    try:
        check(estimator)
    except Exception as exc:  # noqa: BLE001 - re-raised unless scikit-learn skipped it
        if type(exc).__name__ == "SkipTest" and "check_array_api_input" in str(check):
            pytest.skip(str(exc))
        raise


# -- DPSearchCV ----------------------------------------------------------------------------------
def test_search_fits_the_pca_in_every_trial_inside_its_one_event():
    from skdpsco import DPSearchCV
    from skdpsco.model_selection import zcdp_rho

    X, y = load_digits(return_X_y=True)
    ledger = PrivacyAccountant()
    search = DPSearchCV(
        make_pipeline(DPPCA(8), DPLogisticRegression(classes=np.arange(10))),
        {"dppca__n_components": [4, 8]}, epsilon=3.0, n_iter=2, random_state=0, accountant=ledger,
    ).fit(X, y)
    assert [record.estimator for record in ledger.history] == ["DPSearchCV"]
    pca, model = search.best_estimator_[0], search.best_estimator_[-1]
    # both steps fitted at the trial's (epsilon, delta); their rho composed within the trial's
    assert pca.epsilon_ == pytest.approx(model.epsilon_, rel=1e-3) and pca.delta_ == model.delta_
    composed = zcdp_rho(pca.dp_event_) + zcdp_rho(model.dp_event_)
    assert 0.97 * search.trial_rho_ <= composed <= search.trial_rho_ * (1 + 1e-9)
    assert pca.accountant is ledger and pca.random_state is None
    assert search.score(X, y) > 0.5


# -- black-box audit (benchmarks/audits.py) -------------------------------------------------------
@pytest.mark.parametrize("name", ["pca_matrix", pytest.param("pca_private_scaling", marks=pytest.mark.slow)])
def test_black_box_audit_of_the_matrix_release(name):
    from _audits import check_audit

    check_audit(name)


def test_black_box_audit_of_the_default_path_moves_the_off_diagonal_by_one():
    # pca_private_scaling's neighbours (benchmarks/audits.py) with the noise divided by 1e9: the
    # differing row standardises onto (1, +-1) / sqrt 2 (z_1 z_2 = +-1/2) and the statistic, the
    # released correlation less the others' cross product, reads that entry of Z^T Z.
    from benchmarks.audits import AUDITS, weakened

    setup = AUDITS["pca_private_scaling"].setup
    with weakened("gaussian", 1e9):
        values = [setup.statistic(setup.run(dataset, 0)) for dataset in (setup.dataset_0, setup.dataset_1)]
    assert values == pytest.approx([0.5, -0.5], abs=0.01)


def test_search_with_an_accounted_step_searches_whatever_the_signal():
    """The single-fit fallback of the default grid would leave DPPCA's budget out of the search's
    one event: a pipeline with DPPCA is searched, its steps' budgets composed."""
    from sklearn.pipeline import make_pipeline

    from skdpsco import DPLogisticRegression, DPPCA, DPSearchCV, PrivacyAccountant

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] > 0).astype(int)
    ledger = PrivacyAccountant()
    pipeline = make_pipeline(DPPCA(n_components=2), DPLogisticRegression(classes=[0, 1]))
    search = DPSearchCV(pipeline, epsilon=1.0, accountant=ledger, random_state=0).fit(X, y)
    assert search.searched_ and search.search_signal_ < 200  # below the rule's threshold, searched anyway
    assert search.epsilon_ <= 1.0 + 1e-9 and len(ledger.history) == 1
