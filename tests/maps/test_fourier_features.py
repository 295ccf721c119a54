"""RandomFourierFeatures: fused kernel vs a slow NumPy reference, the
mathematics (Z Zᵀ → kernel), sklearn conventions and bad input."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat import RandomFourierFeatures, kernel_matrix
from randfeat._ext import _fourier_fast
from randfeat._maps.kernels import KERNELS
from _fourier_reference import (DTYPES, assert_matches_reference, check_trig_accuracy, correctly_rounded,
                               ulp_error)
from _subprocess_env import expected_vector_path, run_bench, subprocess_env

FEATURE_MAPS = ("cossin", "cos")


def layouts(X):
    """The same matrix in every memory layout the transform accepts."""
    big = np.zeros((2 * X.shape[0], 2 * X.shape[1] + 1), dtype=X.dtype)
    big[::2, 1::2] = X
    readonly = X.copy()
    readonly.flags.writeable = False
    csr64 = sp.csr_matrix(X)
    csr64.indices = csr64.indices.astype(np.int64)
    csr64.indptr = csr64.indptr.astype(np.int64)
    csr32 = sp.csr_matrix(X)
    assert csr32.indices.dtype == np.int32
    return {
        "C": np.ascontiguousarray(X),
        "F": np.asfortranarray(X),
        "F-strided": np.asfortranarray(big)[::2, 1::2],  # unit row stride, wide column stride
        "rows-strided": np.ascontiguousarray(big)[::2, 1::2][:, :],  # neither stride is unit
        "row-step": np.repeat(X, 2, axis=0)[::2],  # unit column stride, ld = 2d
        "readonly": readonly,
        "csr-int32": csr32,
        "csr-int64": csr64,
    }


SHAPES = [
    # (N, d, D): N=1, d=1, D=2, N not a multiple of the tile, several column blocks
    (1, 1, 2),
    (1, 6, 10),
    (5, 1, 2),
    (67, 3, 2),
    (131, 7, 1100),
    (300, 9, 2100),
    # odd widths (cossin: D' - 1 pairs and one phased column)
    (1, 1, 1),
    (5, 2, 3),
    (67, 3, 9),
    (300, 9, 2101),
]


@pytest.mark.kernel
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("feature_map", FEATURE_MAPS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fast_kernel_matches_reference(dtype, feature_map, shape):
    N, d, D = shape
    rng = np.random.default_rng(N * 1000 + d)
    X = rng.normal(size=(N, d)).astype(dtype)
    X[rng.random((N, d)) < 0.3] = 0  # zeros in the CSR versions' rows
    est = RandomFourierFeatures(D, gamma=0.7, feature_map=feature_map, random_state=1).fit(X)
    assert est.random_weights_.dtype == dtype
    for name, Xl in layouts(X).items():
        Z = est.transform(Xl)
        assert Z.dtype == dtype, name
        assert_matches_reference(est, Xl, Z)


@pytest.mark.kernel
def test_csr_with_empty_rows_and_no_nonzeros():
    X = sp.csr_matrix((4, 3))
    est = RandomFourierFeatures(6, random_state=0).fit(np.ones((2, 3)))
    Z = est.transform(X)
    assert_matches_reference(est, X, Z)
    X = sp.csr_matrix(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, 0.0, -1.0]]))
    assert_matches_reference(est, X, est.transform(X))


def test_tile_shape_depends_on_width_and_dtype_only():
    # Fixed tiles are what makes the output independent of the thread count.
    for n_freq in (1, 250, 2500, 10**6):
        for itemsize in (4, 8):
            for cossin in (True, False):
                rows, cols = _fourier_fast.tile_shape(n_freq, itemsize, cossin)
                assert 1 <= cols <= n_freq and rows >= 8
                assert rows * cols * itemsize * (1 + cossin) <= 1 << 20  # fits L2


@pytest.mark.kernel
def test_trig_accuracy_in_ulps():
    check_trig_accuracy()


@pytest.mark.kernel
def test_trig_segment_with_one_huge_argument_uses_libm_for_whole_segment():
    # Mixed segment: every element still accurate, and results deterministic.
    for dtype in DTYPES:
        x = np.linspace(-50, 50, 1001).astype(dtype)
        x[500] = dtype(1e30)
        c, s = x.copy(), np.empty_like(x)
        _fourier_fast.sincos(c, s)
        assert ulp_error(c, correctly_rounded(np.cos, x, dtype), dtype).max() <= 1.0
        assert ulp_error(s, correctly_rounded(np.sin, x, dtype), dtype).max() <= 1.0


@pytest.mark.kernel
def test_huge_feature_arguments_end_to_end():
    # |XW| far beyond the reduction's range: rows fall back to libm, still exact.
    X = np.array([[1e9, 1.0], [0.5, -0.25], [1e15, 3.0]])
    est = RandomFourierFeatures(8, random_state=0).fit(X)
    assert_matches_reference(est, X, est.transform(X))


_ISA_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {tests!r})
from randfeat import RandomFourierFeatures
from randfeat._ext import _fourier_fast
from _fourier_reference import check_trig_accuracy, slow_features, feature_tolerance
worst = check_trig_accuracy()
X = np.random.default_rng(0).normal(size=(97, 13))
for dtype in (np.float64, np.float32):
    for fm in ("cossin", "cos"):
        Xd = X.astype(dtype)
        est = RandomFourierFeatures(1030, feature_map=fm, random_state=0).fit(Xd)
        err = np.abs(est.transform(Xd) - slow_features(est, Xd)).max()
        assert err <= feature_tolerance(est, Xd, dtype), (dtype, fm, err)
print(_fourier_fast.vector_isa(), worst)
"""


@pytest.mark.kernel
@pytest.mark.parametrize("isa", ["baseline", "avx2", "avx512"])
def test_every_vector_path(isa):
    env = subprocess_env(RANDFEAT_VECTOR_ISA=expected_vector_path(isa))
    script = _ISA_SCRIPT.format(tests=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    used, worst = res.stdout.split()
    assert used == expected_vector_path(isa)
    assert float(worst) <= 3.0


def test_bad_vector_isa_env_is_a_clear_error():
    env = dict(os.environ, RANDFEAT_VECTOR_ISA="sse9")
    res = subprocess.run([sys.executable, "-c", "import randfeat"], env=env, capture_output=True, text=True)
    assert res.returncode != 0 and "RANDFEAT_VECTOR_ISA" in res.stderr


# ----------------------------------------------------------- the mathematics
def _kernel_error(X, K, D, seeds, **params):
    params.setdefault("gamma", 1.0)  # the K the callers pass is gamma=1's
    errs = []
    for seed in seeds:
        Z = RandomFourierFeatures(D, random_state=seed, **params).fit_transform(X)
        errs.append(np.abs(Z @ Z.T - K).mean())
    return float(np.mean(errs))


def _applicable_cases():
    for kernel, spec in KERNELS.items():
        for fm in FEATURE_MAPS:
            for sampling in ("iid", "orthogonal", "qmc"):
                if sampling == "orthogonal" and spec.radial_norms is None:
                    continue
                yield kernel, fm, sampling


@pytest.mark.parametrize("kernel, feature_map, sampling", list(_applicable_cases()))
def test_kernel_error_falls_like_one_over_sqrt_D(kernel, feature_map, sampling):
    X = np.random.default_rng(0).normal(size=(30, 4)) * 0.5
    K = kernel_matrix(X, kernel=kernel, gamma=0.8, nu=1.5)
    params = dict(kernel=kernel, gamma=0.8, nu=1.5, feature_map=feature_map, sampling=sampling)
    seeds = range(4)
    small = _kernel_error(X, K, 128, seeds, **params)
    large = _kernel_error(X, K, 2048, seeds, **params)
    ratio = large / small  # 1/sqrt(16) = 0.25 for Monte Carlo
    if sampling == "qmc":
        # Quasi-Monte Carlo converges at least as fast as Monte Carlo (often
        # nearly 1/D): only the upper bound applies.
        assert ratio <= 0.25 * 1.6, ratio
    else:
        assert 0.25 * 0.6 <= ratio <= 0.25 * 1.6, ratio
    assert large < 0.05


@pytest.mark.parametrize("sampling", ["orthogonal", "qmc"])
def test_structured_sampling_beats_iid_for_rbf(sampling):
    X = np.random.default_rng(0).normal(size=(40, 5)) * 0.4
    K = kernel_matrix(X, kernel="rbf", gamma=1.0)
    seeds = range(8)
    iid = _kernel_error(X, K, 256, seeds, feature_map="cossin")
    other = _kernel_error(X, K, 256, seeds, feature_map="cossin", sampling=sampling)
    assert other < 0.85 * iid, (other, iid)
    if sampling == "qmc":  # QMC also for the cos map (b is a QMC coordinate too)
        iid = _kernel_error(X, K, 256, seeds, feature_map="cos")
        other = _kernel_error(X, K, 256, seeds, feature_map="cos", sampling="qmc")
        assert other < 0.85 * iid, (other, iid)


def test_orthogonal_blocks_are_orthogonal():
    d = 6
    est = RandomFourierFeatures(2 * 15, sampling="orthogonal", random_state=0).fit(np.zeros((1, d)))
    W = est.random_weights_
    block = W[:, :d]  # the first d frequencies come from one orthogonal block
    G = block.T @ block
    np.testing.assert_allclose(G - np.diag(np.diag(G)), 0, atol=1e-10)


def test_qmc_beyond_sobol_dimension_uses_halton():
    from scipy.stats import qmc

    d = qmc.Sobol.MAXDIM  # with the cos map's phase coordinate: one dimension too many
    est = RandomFourierFeatures(4, feature_map="cos", sampling="qmc", random_state=0)
    est.fit(np.zeros((1, d)))
    assert np.isfinite(est.random_weights_).all() and est.random_weights_.shape == (d, 4)


def test_gamma_scale_like_rbfsampler():
    import scipy.sparse as sp
    from sklearn.kernel_approximation import RBFSampler

    X = np.random.default_rng(0).normal(size=(50, 4)) * 3 + 5
    est = RandomFourierFeatures(10, gamma="scale", random_state=0).fit(X)
    assert est.gamma_ == pytest.approx(1.0 / (4 * X.var()), rel=1e-12)
    # scikit-learn's RBFSampler is the oracle (its resolved value is the private _gamma)
    assert est.gamma_ == pytest.approx(RBFSampler(gamma="scale", random_state=0).fit(X)._gamma, rel=1e-12)
    Xs = sp.random(60, 5, density=0.4, random_state=2, format="csr")
    got = RandomFourierFeatures(10, gamma="scale", random_state=0).fit(Xs).gamma_
    assert got == pytest.approx(RBFSampler(gamma="scale", random_state=0).fit(Xs)._gamma, rel=1e-12)


# ------------------------------------------------ determinism, dtype, pickle
@pytest.mark.kernel
def test_bit_identical_for_any_thread_count():
    X = np.random.default_rng(0).normal(size=(1100, 20))
    for fm in FEATURE_MAPS:
        ref = None
        for n_jobs in (1, 2, 3):
            Z = RandomFourierFeatures(1200, feature_map=fm, random_state=0, n_jobs=n_jobs).fit_transform(X)
            if ref is None:
                ref = Z
            assert np.array_equal(Z, ref), (fm, n_jobs)
    # And at the kernel level, where no size threshold can lower the thread count.
    W = np.random.default_rng(1).normal(size=(20, 300))
    outs = []
    for n_threads in (1, 2, 4):
        out = np.empty((1100, 600))
        _fourier_fast.fourier_dense(X, W, np.zeros(0), out, True, 0.5, n_threads)
        outs.append(out)
    assert all(np.array_equal(o, outs[0]) for o in outs)


@pytest.mark.kernel
def test_dtypes():
    X = np.random.default_rng(0).normal(size=(20, 3))
    est = RandomFourierFeatures(8, random_state=0).fit(X.astype(np.float32))
    assert est.random_weights_.dtype == np.float32
    assert est.transform(X.astype(np.float32)).dtype == np.float32
    assert est.transform(X).dtype == np.float64  # output follows the input's dtype
    est = RandomFourierFeatures(8, feature_map="cos", random_state=0).fit((X * 10).astype(np.int64))
    assert est.random_weights_.dtype == np.float64 and est.random_offset_.dtype == np.float64
    assert est.transform((X * 10).astype(np.int32)).dtype == np.float64
    assert RandomFourierFeatures(8, random_state=0).fit(X).random_offset_ is None


def test_same_seed_same_features_and_pickle_round_trip():
    X = np.random.default_rng(0).normal(size=(30, 4))
    for fm in FEATURE_MAPS:
        est = RandomFourierFeatures(16, feature_map=fm, sampling="qmc", random_state=3).fit(X)
        again = clone(est).fit(X)
        assert np.array_equal(est.transform(X), again.transform(X))
        loaded = pickle.loads(pickle.dumps(est))
        assert np.array_equal(est.transform(X), loaded.transform(X))


def test_feature_names_and_set_output():
    X = np.random.default_rng(0).normal(size=(5, 3))
    est = RandomFourierFeatures(4, random_state=0).fit(X)
    names = est.get_feature_names_out()
    assert list(names) == [f"randomfourierfeatures{i}" for i in range(4)]
    pd = pytest.importorskip("pandas")
    out = est.set_output(transform="pandas").transform(X)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == list(names)


# -------------------------------------------------------- sklearn conventions
# The default instance passes every check with no expected failure: the
# checks set n_components=1, an odd width, which cossin defines (one
# random-phase column; see test_odd_cossin_*).
@parametrize_with_checks(
    [
        RandomFourierFeatures(),
        RandomFourierFeatures(10, feature_map="cos", random_state=0),
        RandomFourierFeatures(10, feature_map="cossin", random_state=0),
        RandomFourierFeatures(10, kernel="matern", sampling="orthogonal", random_state=0),
    ],
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_in_pipeline_and_grid_search():
    from sklearn.linear_model import RidgeClassifier
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = (np.hypot(X[:, 0], X[:, 1]) < 1).astype(int)  # not linearly separable
    pipe = make_pipeline(RandomFourierFeatures(200, random_state=0), RidgeClassifier(alpha=1e-3))
    search = GridSearchCV(pipe, {"randomfourierfeatures__gamma": [0.5, 2.0]}, cv=2).fit(X, y)
    assert search.best_score_ > 0.8


# ------------------------------------------------------------------ bad input
X_OK = np.random.default_rng(0).normal(size=(5, 3))


# Bad parameters: tests/estimators/test_parameter_validation.py.


@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([[1.0, np.nan, 0.0]]), "NaN"),
        (np.array([[1.0, np.inf, 0.0]]), "infinity"),
        (sp.csr_matrix(np.array([[1.0, np.nan, 0.0]])), "NaN"),
        (np.zeros((2, 3, 4)), "dim"),
        (np.zeros((0, 3)), "0 sample"),
        (np.zeros((3, 0)), "0 feature"),
        (np.zeros(3), "2D"),
    ],
)
def test_bad_X_raises(X, match):
    with pytest.raises(ValueError, match=match):
        RandomFourierFeatures(4).fit(X)
    est = RandomFourierFeatures(4, random_state=0).fit(X_OK)
    if X.ndim == 2 and X.shape[1] == 3:
        with pytest.raises(ValueError, match=match):
            est.transform(X)


def test_transform_errors():
    est = RandomFourierFeatures(4, random_state=0)
    with pytest.raises(NotFittedError):
        est.transform(X_OK)
    est.fit(X_OK)
    with pytest.raises(ValueError, match="features"):
        est.transform(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="features"):
        est.transform(sp.csr_matrix(np.zeros((2, 2))))


# ------------------------------------------------------------------- bench
def test_bench_transform_tiny_runs(tmp_path):
    res = run_bench("transform.py", "--tiny", "--threads", "1", "--out", tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    md = (tmp_path / "transform-tiny.md").read_text()
    assert "RBFSampler / randfeat" in md and "float32" in md and "extra <= 64 MB" in md
    assert (tmp_path / "transform-tiny.csv").read_text().count("\n") == 1 + 2 * 2  # header + 2 dtypes x 2 maps
