"""Pipelines inside DPSearchCV: steps whose fit reads only public parameters (encoders given their
categories, column selection by name or dtype, declared row-wise functions) are accepted, every
other step is refused with its own reason and fix before anything is charged; algorithms without
a zCDP guarantee are refused up front; wrappers that fit on the labels outside the accountant warn."""

import warnings

import numpy as np
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.datasets import make_classification
from sklearn.ensemble import StackingClassifier, StackingRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    Normalizer,
    OneHotEncoder,
    OrdinalEncoder,
    StandardScaler,
)

from skdpsco import DPLogisticRegression, DPLpRegression, DPSearchCV, PrivacyAccountant, PrivacyWarning
from skdpsco.model_selection import WITHOUT_ZCDP, zcdp_rho
from skdpsco.preprocessing import RowwiseTransformer, public_encoder, row_dependence
from skdpsco.solvers import ALGORITHMS

pd = pytest.importorskip("pandas")

COLORS, SIZES = ["blue", "green", "red"], ["L", "S"]


@pytest.fixture(scope="module")
def table():
    """A table with two categorical and two numeric columns; the label depends on both kinds."""
    rng = np.random.default_rng(0)
    n = 2400
    frame = pd.DataFrame({
        "color": rng.choice(COLORS, n),
        "size": rng.choice(SIZES, n),
        "x1": rng.normal(size=n),
        "x2": rng.normal(size=n),
    })
    logit = 2.5 * (frame["color"] == "red") - 1.5 * (frame["color"] == "blue") + 1.5 * frame["x1"]
    y = (logit + rng.logistic(size=n) > 0).astype(int).to_numpy()
    return frame.iloc[:2000], y[:2000], frame.iloc[2000:], y[2000:]


def private_model(**params):
    return DPLogisticRegression(classes=[0, 1], **params)


def search(pipeline, ledger, **params):
    return DPSearchCV(
        pipeline, {"dplogisticregression__alpha": [1e-3, 1e-2]}, n_iter=2, random_state=0, accountant=ledger,
        **params,
    )


# -- accepted pipelines ------------------------------------------------------------------------
def test_search_fits_a_table_with_public_categories_and_predicts_unseen_ones(table):
    X, y, X_test, y_test = table
    ledger = PrivacyAccountant()
    encoder = public_encoder({"color": COLORS, "size": SIZES})
    fitted = search(make_pipeline(encoder, private_model()), ledger, epsilon=2.0).fit(X, y)
    assert len(ledger.history) == 1 and fitted.epsilon_ <= 2.0
    unseen = X_test.assign(color=np.where(np.arange(len(X_test)) % 10 == 0, "mauve", X_test["color"]))
    assert set(fitted.predict(unseen)) <= {0, 1}
    majority = max(np.mean(y_test), 1 - np.mean(y_test))
    assert fitted.score(X_test, y_test) > majority + 0.05


def test_search_accepts_a_dtype_selector_an_ordinal_encoder_and_nested_pipelines(table):
    X, y, _, _ = table
    ledger = PrivacyAccountant()
    columns = ColumnTransformer(
        [
            ("color", OneHotEncoder(categories=[COLORS], handle_unknown="infrequent_if_exist"), ["color"]),
            ("size", OrdinalEncoder(categories=[SIZES], handle_unknown="use_encoded_value", unknown_value=-1),
             make_column_selector(pattern="^size$")),
            ("numeric", make_pipeline(RowwiseTransformer(np.tanh), "passthrough"),
             make_column_selector(dtype_include=np.number)),
        ],
        sparse_threshold=0,
    )
    search(make_pipeline(columns, Normalizer(), private_model(data_norm=1.0)), ledger).fit(X, y)
    assert len(ledger.history) == 1


def test_search_accepts_an_object_array_encoded_by_column_index(table):
    X, y, X_test, _ = table
    ledger = PrivacyAccountant()
    rows = X.to_numpy(dtype=object)
    fitted = search(make_pipeline(public_encoder({0: COLORS, 1: SIZES}), private_model()), ledger).fit(rows, y)
    assert len(ledger.history) == 1
    assert fitted.predict(X_test.to_numpy(dtype=object)).shape == (len(X_test),)


# -- refused steps: the reason and the fix of each, nothing charged ------------------------------
def _ct(*transformers, **params):
    return ColumnTransformer(list(transformers), **{"sparse_threshold": 0, **params})


REFUSED = {
    "auto categories": (
        OneHotEncoder(handle_unknown="ignore"), r"'onehotencoder' \(OneHotEncoder\): categories='auto'.*"
        r"Pass categories=\[\.\.\.\] \(the public category lists\).*public_encoder"),
    "unknown raises": (
        OneHotEncoder(categories=[COLORS]), r"handle_unknown='error'.*Pass handle_unknown='ignore'"),
    "unknown warns": (
        OneHotEncoder(categories=[COLORS], handle_unknown="warn"), r"handle_unknown='warn'.*'ignore'"),
    "drop warns": (
        OneHotEncoder(categories=[COLORS], handle_unknown="ignore", drop="if_binary"),
        r"drop='if_binary'.*warn.*Pass drop=None"),
    "counts": (
        OneHotEncoder(categories=[COLORS], handle_unknown="infrequent_if_exist", min_frequency=5),
        r"min_frequency=5.*counts.*Pass min_frequency=None"),
    "ordinal raises": (
        OrdinalEncoder(categories=[COLORS]), r"'ordinalencoder'.*handle_unknown='use_encoded_value'"),
    "density": (
        ColumnTransformer([("color", public_encoder({"color": COLORS}), ["color"])]),
        r"'columntransformer' \(ColumnTransformer\): sparse_threshold=0.3.*Pass sparse_threshold=0"),
    "callable columns": (
        _ct(("color", OneHotEncoder(categories=[COLORS], handle_unknown="ignore"), lambda frame: ["color"])),
        r"'columntransformer__color'.*callable.*List the columns.*make_column_selector"),
    "scaled remainder": (
        _ct(("color", "drop", ["color"]), remainder=StandardScaler()),
        r"'columntransformer__remainder' \(StandardScaler\): it is fitted on the rows.*DPStandardScaler"),
    "nested encoder": (
        _ct(("cat", make_pipeline(OneHotEncoder()), ["color"])),
        r"'columntransformer__cat__onehotencoder' \(OneHotEncoder\): categories='auto'"),
    "function across rows": (
        FunctionTransformer(lambda X: (X - X.mean(0)) / X.std(0)),
        r"'functiontransformer' \(FunctionTransformer\): its function may compute across the rows.*"
        r"RowwiseTransformer\(func\)"),
    "inverse check": (
        RowwiseTransformer(np.log1p, inverse_func=np.expm1), r"check_inverse=True.*Pass check_inverse=False"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_each_refused_step_says_why_and_how_to_fix_it_before_any_charge(table, case):
    X, y, _, _ = table
    step, message = REFUSED[case]
    ledger = PrivacyAccountant()
    searched = search(make_pipeline(step, private_model()), ledger)
    with pytest.raises(ValueError, match="DPSearchCV refuses the pipeline step .*" + message):
        searched.fit(X, y)
    assert ledger.history == ()
    assert not [name for name in vars(searched) if name.endswith("_")]


def test_the_rule_reads_parameters_only_and_accepts_the_public_encoder():
    assert row_dependence(public_encoder({"color": COLORS}, remainder=Normalizer())) is None
    assert row_dependence(RowwiseTransformer(np.log1p, inverse_func=np.expm1, check_inverse=False)) is None
    assert row_dependence(OneHotEncoder(categories=[COLORS], handle_unknown="ignore")) is None
    assert "RowwiseTransformer(step.transform)" in row_dependence(_Doubler())


class _Doubler(Normalizer):
    """A subclass of an accepted type: it may override fit, so it is not accepted by type."""


def test_public_encoder_encodes_known_categories_and_zeros_unknown_ones():
    encoder = public_encoder({0: ["a", "b"]}, remainder="drop")
    rows = np.array([["b"], ["z"], ["a"]], dtype=object)
    np.testing.assert_array_equal(encoder.fit_transform(rows), [[0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match=r"categories\[0\] is empty"):
        public_encoder({0: []})
    with pytest.raises(ValueError, match="at least one column"):
        public_encoder({})


# -- algorithms without a zCDP guarantee -------------------------------------------------------
@pytest.mark.parametrize("in_estimator", [False, True])
def test_objective_perturbation_is_refused_up_front_with_one_clear_error(table, in_estimator):
    X, y, _, _ = table
    ledger = PrivacyAccountant()
    model = private_model(algorithm="objective_perturbation" if in_estimator else "auto")
    grid = {"dplogisticregression__alpha": [1e-3]}
    if not in_estimator:  # listed, drawn or not: the refusal must not depend on the hidden trials
        grid["dplogisticregression__algorithm"] = ["noisy_gd", "objective_perturbation"]
    searched = DPSearchCV(make_pipeline(public_encoder({"color": COLORS, "size": SIZES}), model), grid,
                          n_iter=2, random_state=0, accountant=ledger)
    with pytest.raises(ValueError, match=r"cannot search dplogisticregression__algorithm='objective_perturbation'"
                       r".*zCDP.*\(epsilon, delta\) bound.*fit it once, outside the search") as refused:
        searched.fit(X, y)
    assert refused.value.__cause__ is None and refused.value.__context__ is None
    assert "_Planned" not in str(refused.value)
    assert ledger.history == ()


def test_the_algorithms_refused_are_exactly_those_whose_events_have_no_zcdp_bound():
    X, y = make_classification(n_samples=300, n_features=4, random_state=0)
    without = set()
    for algorithm in ALGORITHMS:
        ledger = PrivacyAccountant()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                private_model(algorithm=algorithm, alpha=0.1, data_norm=1.0, accountant=ledger, random_state=0).fit(X, y)
            except ValueError:
                continue  # not applicable to this problem
        try:
            zcdp_rho(ledger.history[-1].event)
        except ValueError:
            without.add(algorithm)
    assert without == set(WITHOUT_ZCDP)


# -- wrappers that fit on the labels outside the accountant ------------------------------------
def _private_fit_warnings(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [str(w.message) for w in caught if issubclass(w.category, PrivacyWarning)]


@pytest.mark.parametrize("wrapper", ["CalibratedClassifierCV", "StackingClassifier", "StackingRegressor"])
def test_a_wrapper_that_fits_on_the_labels_outside_the_accountant_warns(wrapper):
    X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    ledger = PrivacyAccountant()
    classifier = private_model(data_norm=1.0, accountant=ledger)
    regressor = DPLpRegression(data_norm=1.0, y_bound=1.0, accountant=ledger)
    outer = {
        "CalibratedClassifierCV": lambda: CalibratedClassifierCV(classifier, cv=2),
        "StackingClassifier": lambda: StackingClassifier([("dp", classifier)], LogisticRegression(), cv=2),
        "StackingRegressor": lambda: StackingRegressor([("dp", regressor)], LinearRegression(), cv=2),
    }[wrapper]()
    messages = _private_fit_warnings(lambda: outer.fit(X, y))
    assert messages and all(m.startswith(f"{wrapper} fits a map of its own") for m in messages)
    assert "FrozenEstimator" in messages[0]


def test_plain_fits_and_accounted_wrappers_do_not_warn():
    X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    model = private_model(data_norm=1.0, accountant=PrivacyAccountant())
    assert _private_fit_warnings(lambda: model.fit(X, y)) == []
    assert _private_fit_warnings(lambda: GridSearchCV(model, {"alpha": [0.0, 0.1]}, cv=2).fit(X, y)) == []


def test_a_search_inside_a_wrapper_warns_once_whatever_the_number_of_trials():
    X, y = make_classification(n_samples=400, n_features=4, random_state=0)
    searched = DPSearchCV(private_model(data_norm=1.0), {"alpha": [0.0, 0.1]}, n_iter=4, random_state=0,
                          accountant=PrivacyAccountant())
    messages = _private_fit_warnings(lambda: CalibratedClassifierCV(searched, cv=2, ensemble=False).fit(X, y))
    # cross_val_predict fits 2 searches, the final fit one: one warning each, not one per trial
    assert len(messages) == 3 and all(m.startswith("CalibratedClassifierCV fits a map") for m in messages)
