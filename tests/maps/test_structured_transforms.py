"""Structured random features (SORF, Fastfood): the compiled transform against NumPy, and the mathematics.

References:

* ``dense_frequencies``: the d × D' matrix the structured map stands for,
  built from ``scipy.linalg.hadamard`` (H D₁ H D₂ H D₃, H G Π H B), so the
  features are checked against ``cos(X Wᵀ)`` in float64 with a bound of
  n·eps times the transform's natural scale (n = the padded dimension);
* ``level_order_arguments``: the same levels in the same order as the
  kernel, in NumPy in X's dtype; the kernel's arguments must equal it bit
  for bit on every vector path (the transform has only additions,
  subtractions and exact sign flips), and its features must equal the
  existing trig kernel (``_fourier_fast.sincos``) applied to them.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from randfeat import kernel_matrix
from randfeat._ext import _fourier_fast, _structured_fast
from randfeat._maps.kernels import KERNELS
from randfeat._maps.structured import (
    block_log2,
    draw_structured,
    kernel_params,
    multipliers,
    structured_features,
)
from _structured_reference import (argument_tolerance, dense_frequencies, hadamard_levels, level_order_arguments,
                                   reference_features)
from _subprocess_env import BENCH, expected_vector_path, run_bench, subprocess_env

TESTS = os.path.dirname(os.path.abspath(__file__))
ISAS = ["baseline", "avx2", "avx512"]
SAMPLINGS = ["sorf", "fastfood"]


# ----------------------------------------------------------------- cases
def make_case(sampling, d, n_components, feature_map="cossin", kernel="rbf", gamma=0.3, seed=0, nu=1.5):
    n_freq = (n_components + 1) // 2 if feature_map == "cossin" else n_components
    rng = np.random.default_rng(seed)
    draw = draw_structured(KERNELS[kernel], sampling, d, n_freq, nu, rng)
    mult = multipliers(KERNELS[kernel], draw, gamma)
    if feature_map == "cos":
        b = rng.uniform(0, 2 * np.pi, n_freq)
    else:
        b = rng.uniform(0, 2 * np.pi, 1) if n_components % 2 else None
    return draw, mult, b


def data(n, d, dtype=np.float64, seed=1):
    return (np.random.default_rng(seed).standard_normal((n, d)) / np.sqrt(d)).astype(dtype)


def check_against_references(sampling, d, n_components, feature_map, dtype, n_rows=23, seed=0):
    """All the reference checks for one case; returns the kernel's arguments."""
    draw, mult, b = make_case(sampling, d, n_components, feature_map, seed=seed)
    X = data(n_rows, d, dtype, seed=seed + 1)
    A = structured_features(X, draw, mult, feature_map, n_components, b, 2, epilogue="args")
    assert A.dtype == dtype and A.shape == (n_rows, draw.n_freq)
    # Bit for bit: the same operations in NumPy.
    np.testing.assert_array_equal(A, level_order_arguments(X, draw, mult))
    # Against the Hadamard matrices themselves, within n·eps of the transform's scale.
    A_ref = X.astype(np.float64) @ dense_frequencies(draw, mult.astype(dtype).astype(np.float64)).T
    tol = argument_tolerance(X, draw, mult, dtype)
    assert np.all(np.abs(A - A_ref) <= tol), np.max(np.abs(A - A_ref) / tol)
    Z = structured_features(X, draw, mult, feature_map, n_components, b, 2)
    assert Z.dtype == dtype and Z.shape == (n_rows, n_components) and Z.flags.c_contiguous
    Z_ref = reference_features(A_ref, feature_map, n_components, b)
    scale = np.sqrt((1.0 if feature_map == "cossin" else 2.0) / draw.n_freq)
    ztol = scale * (np.max(tol) * 2 + 16 * np.finfo(dtype).eps)
    assert np.max(np.abs(Z - Z_ref)) <= ztol
    # The epilogue is the existing trig kernel on those arguments.
    np.testing.assert_array_equal(Z, trig_of(A, feature_map, n_components, b, dtype))
    return A


def trig_of(A, feature_map, n_components, b, dtype):
    """The features from the kernel's arguments through _fourier_fast's trig hooks (same vector path)."""
    n_freq = A.shape[1]
    out = np.empty((A.shape[0], n_components), dtype=dtype)
    if feature_map == "cos":
        scale = np.sqrt(2.0 / n_freq)
        bb = np.ascontiguousarray(b, dtype=dtype)
        for i in range(A.shape[0]):
            x = A[i].copy()
            _fourier_fast.cos_shifted(x, bb, scale)
            out[i] = x
        return out
    scale = float(dtype(np.sqrt(1.0 / n_freq)))
    m = n_freq - (n_components % 2)
    for i in range(A.shape[0]):
        x, s = A[i, :m].copy(), np.empty(m, dtype=dtype)
        if m:
            _fourier_fast.sincos(x, s, scale)
        out[i, :m], out[i, n_freq:] = x, s
        if n_components % 2:
            last = A[i, m : m + 1].copy()
            _fourier_fast.cos_shifted(last, np.asarray(b[:1], dtype=dtype), float(dtype(scale) * dtype(np.sqrt(2.0))))
            out[i, m] = last[0]
    return out


# ------------------------------------------------------------- the transform
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hadamard_blocks_match_scipy(dtype):
    rng = np.random.default_rng(0)
    for log_n in range(0, 13):
        n = 1 << log_n
        x = rng.standard_normal(max(n, _structured_fast.LANES) * 3).astype(dtype)
        y = x.copy()
        _structured_fast.fwht_blocks(y, log_n)
        np.testing.assert_array_equal(y, hadamard_levels(x, log_n))
        ref = (x.astype(np.float64).reshape(-1, n) @ scipy.linalg.hadamard(n).T).reshape(-1)
        bound = n * np.finfo(dtype).eps * np.sqrt(n) * np.linalg.norm(x.reshape(-1, n), axis=1).max()
        assert np.abs(y - ref).max() <= bound


CASES = [  # (d, n_components): d = 1, power of two or not, D below/above/not a multiple of the block, odd
    (1, 7), (1, 64), (2, 10), (3, 33), (5, 16), (16, 64), (17, 100), (50, 257), (64, 64),
    (64, 1000), (100, 129), (129, 300), (256, 255),
]


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("feature_map", ["cossin", "cos"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_features_match_references(sampling, feature_map, dtype):
    for d, D in CASES:
        check_against_references(sampling, d, D, feature_map, dtype)


def test_large_blocks_match_references():
    for sampling in SAMPLINGS:
        for dtype in (np.float32, np.float64):
            check_against_references(sampling, 1000, 4100, "cossin", dtype, n_rows=5)


_ISA_SCRIPT = """
import sys, numpy as np
sys.path[:0] = [{tests!r}, {tests_root!r}]
import test_structured_transforms as t
from randfeat._ext import _structured_fast
out = {{}}
for sampling in t.SAMPLINGS:
    for dtype in (np.float32, np.float64):
        for fm in ("cossin", "cos"):
            for d, D in t.CASES + [(700, 3001)]:
                A = t.check_against_references(sampling, d, D, fm, dtype, n_rows=9)
                out[f"{{sampling}}-{{dtype.__name__}}-{{fm}}-{{d}}-{{D}}"] = A
np.savez({path!r}, **out)
print(_structured_fast.vector_isa())
"""


@pytest.mark.parametrize("isa", ISAS)
def test_every_vector_path(isa, tmp_path):
    if expected_vector_path(isa) != isa:
        pytest.skip(f"this CPU (or run) has no {isa} path")
    path = tmp_path / f"{isa}.npz"
    res = subprocess.run([sys.executable, "-c", _ISA_SCRIPT.format(tests=TESTS, tests_root=os.path.dirname(TESTS), path=str(path))],
                         env=subprocess_env(RANDFEAT_VECTOR_ISA=isa), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[-1] == isa
    # The arguments are the same bits on every path (no inexact fused operation).
    if isa != "baseline":
        base = tmp_path / "baseline.npz"
        res = subprocess.run([sys.executable, "-c", _ISA_SCRIPT.format(tests=TESTS, tests_root=os.path.dirname(TESTS), path=str(base))],
                             env=subprocess_env(RANDFEAT_VECTOR_ISA="baseline"), capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        with np.load(path) as a, np.load(base) as b:
            assert sorted(a.files) == sorted(b.files)
            for k in a.files:
                np.testing.assert_array_equal(a[k], b[k], err_msg=k)


# ------------------------------------------------- agnosticism of the results
@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_thread_count_and_row_splits_give_the_same_bits(sampling, dtype):
    for d, D, fm in [(37, 1001, "cossin"), (128, 4096, "cos"), (3, 50, "cossin")]:
        draw, mult, b = make_case(sampling, d, D, fm)
        X = data(301, d, dtype)
        Z = structured_features(X, draw, mult, fm, D, b, 1)
        for n_threads in (2, 3, 8):
            np.testing.assert_array_equal(structured_features(X, draw, mult, fm, D, b, n_threads), Z)
        # A row's features never depend on the rows computed with it.
        for split in ([1], [7, 100, 1], [300]):
            parts, start = [], 0
            while start < X.shape[0]:
                for size in split:
                    parts.append(structured_features(X[start : start + size], draw, mult, fm, D, b, 2))
                    start += size
            np.testing.assert_array_equal(np.vstack(parts)[: X.shape[0]], Z)
        np.testing.assert_array_equal(structured_features(X[::-1], draw, mult, fm, D, b, 2), Z[::-1])


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layouts_and_csr_give_the_same_bits(sampling, dtype):
    d, D = 70, 513
    draw, mult, b = make_case(sampling, d, D)
    X = data(120, d, dtype)
    X[np.abs(X) < 0.1] = 0  # some zeros for the CSR
    Z = structured_features(X, draw, mult, "cossin", D, b, 2)
    ro = X.copy()
    ro.flags.writeable = False
    wide = np.zeros((120, 2 * d), dtype=dtype)
    wide[:, ::2] = X
    for same in (np.asfortranarray(X), ro, wide[:, ::2]):
        np.testing.assert_array_equal(structured_features(same, draw, mult, "cossin", D, b, 2), Z)
    csr = sp.csr_matrix(X)
    for index in (np.int32, np.int64):
        C = sp.csr_matrix((csr.data, csr.indices.astype(index), csr.indptr.astype(index)), shape=csr.shape)
        np.testing.assert_array_equal(structured_features(C, draw, mult, "cossin", D, b, 2), Z)
    empty = sp.csr_matrix((5, d), dtype=dtype)
    np.testing.assert_array_equal(structured_features(empty, draw, mult, "cossin", D, b, 2),
                                  structured_features(np.zeros((5, d), dtype), draw, mult, "cossin", D, b, 2))
    assert structured_features(X[:0], draw, mult, "cossin", D, b, 2).shape == (0, D)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("feature_map,D", [("cossin", 200), ("cossin", 201), ("cos", 100)])
def test_huge_arguments_fall_back_per_row(dtype, feature_map, D):
    # Arguments beyond the polynomial trig's range make that row's trig use
    # libm (randfeat_trig.h); the other rows keep their bits.
    draw, mult, b = make_case("sorf", 30, D, feature_map)
    X = data(12, 30, dtype)
    X[5] *= 1e9 if dtype == np.float64 else 1e5
    A = structured_features(X, draw, mult, feature_map, D, b, 2, epilogue="args")
    assert np.abs(A[5]).max() > _fourier_fast.trig_limits()[dtype == np.float32]
    Z = structured_features(X, draw, mult, feature_map, D, b, 2)
    np.testing.assert_array_equal(Z, trig_of(A, feature_map, D, b, dtype))
    # libm on the row's arguments (a phase is added in the features' dtype first).
    a = A[5].astype(np.float64)
    if feature_map == "cos":
        ref = np.sqrt(2.0 / D) * np.cos((A[5] + b.astype(dtype)).astype(np.float64))
        assert np.abs(Z[5] - ref).max() < 4 * np.finfo(dtype).eps
    else:
        m = draw.n_freq - D % 2
        ref = np.sqrt(1.0 / draw.n_freq) * np.concatenate([np.cos(a[:m]), np.sin(a[:m])])
        assert np.abs(np.concatenate([Z[5, :m], Z[5, draw.n_freq:]]) - ref).max() < 4 * np.finfo(dtype).eps
    normal = np.delete(np.arange(12), 5)
    np.testing.assert_array_equal(structured_features(X[normal], draw, mult, feature_map, D, b, 2), Z[normal])


def test_overflow_is_a_clear_error():
    draw, mult, b = make_case("sorf", 8, 16)
    X = np.full((2, 8), 1e307)
    with pytest.raises(ValueError, match="overflows"):
        structured_features(X, draw, mult, "cossin", 16, b, 1)


def test_kernel_checks_its_parameters():
    draw, mult, b = make_case("fastfood", 8, 32)
    p = kernel_params(draw, mult, np.float64)
    out = np.empty((2, 32))
    X = data(2, 8)
    args = dict(log_n=3, diag0=p.diag0, diag1=p.diag1, diag2=p.diag2, perm=p.perm, mult=p.mult,
                b=np.zeros(0), out=out, kind="fastfood", epilogue="cossin", odd=False, phase=0.0, scale=0.25,
                n_threads=1)
    _structured_fast.structured_dense(X, **args)
    bad_perm = p.perm.copy()
    bad_perm[3] = len(bad_perm)
    for change, message in [
        (dict(perm=bad_perm), "perm"),
        (dict(diag0=p.diag0[1:]), "multiple"),
        (dict(out=np.empty((2, 31))), "shape"),
        (dict(kind="sorf2"), "unknown"),
        (dict(diag1=np.zeros(len(p.diag1) + 1)[1:]), "aligned"),
        (dict(log_n=2), "do not fit"),
    ]:
        with pytest.raises(ValueError, match=message):
            _structured_fast.structured_dense(X, **{**args, **change})


# ----------------------------------------------------------- the mathematics
def test_draw_is_o_of_D_and_blocks_pad_the_input():
    spec = KERNELS["rbf"]
    draw = draw_structured(spec, "sorf", 4000, 8192, 1.5, np.random.default_rng(0))
    assert draw.block_size == 4096 and draw.n_blocks == 2
    assert draw.nbytes < 40 * 8192  # a d × D' matrix would be 4000 * 8192 * 8 bytes
    draw = draw_structured(spec, "fastfood", 4000, 8192, 1.5, np.random.default_rng(0))
    assert draw.nbytes < 40 * 8192
    assert [block_log2(d) for d in (1, 2, 3, 4, 5, 1024, 1025)] == [0, 1, 2, 2, 3, 10, 11]
    assert all(sorted(p) == list(range(4096)) for p in draw.perm)


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("kernel", ["laplacian", "cauchy"])
def test_non_radial_kernels_are_refused(sampling, kernel):
    with pytest.raises(ValueError, match="spherically symmetric"):
        draw_structured(KERNELS[kernel], sampling, 8, 16, 1.5, np.random.default_rng(0))


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_frequencies_follow_the_spectral_density(sampling):
    # Row norms are the radial draws (chi with n degrees for rbf); the rows of
    # a block are orthogonal (sorf) or share one norm before rescaling (fastfood).
    draw, mult, _ = make_case(sampling, 64, 2 * 64 * 40, gamma=0.5)
    W = dense_frequencies(draw, np.ones(draw.n_freq))
    norms = np.linalg.norm(W, axis=1)
    block = W[:64] / norms[:64, None]
    if sampling == "sorf":
        np.testing.assert_allclose(norms, 64**1.5, rtol=1e-12)
        np.testing.assert_allclose(block @ block.T, np.eye(64), atol=1e-12)
    W = dense_frequencies(draw, mult)
    # rbf at gamma = 0.5: omega ~ N(0, I); the entries' moments over 163840 values.
    w = W.ravel()
    assert abs(w.mean()) < 0.01 and abs(w.var() - 1.0) < 0.02
    assert abs(np.mean(w**4) - 3.0) < 0.1


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("kernel,nu", [("rbf", 1.5), ("matern", 0.5), ("matern", 2.5)])
def test_expected_gram_is_the_kernel(sampling, kernel, nu):
    # E[z(x)ᵀz(y)] = k(x, y), from 100 independent maps of D = 256 over the
    # 435 pairs of 30 points: the mean's distance to the kernel is a small
    # fraction of one map's error (bias + Monte Carlo error of the mean,
    # ~0.1 of it when unbiased; measured 0.05-0.09 here).  Fastfood is exactly
    # unbiased: the pairs' t-statistics (mean - k)/se are standard normal
    # (mean t² ≈ 1; measured 0.8-1.0 at 600 maps).  SORF has a small bias
    # (Yu et al. 2016, Thm 3), visible at 600 maps for matern ν = 1/2 (mean
    # t² 1.9) but a twentieth of one map's error.
    X = data(30, 60, seed=3)
    K = kernel_matrix(X, kernel=kernel, gamma=0.5, nu=nu)
    iu = np.triu_indices(30, 1)
    grams = []
    for seed in range(100):
        draw, mult, b = make_case(sampling, 60, 256, kernel=kernel, gamma=0.5, seed=seed, nu=nu)
        Z = structured_features(X, draw, mult, "cossin", 256, b, 2)
        grams.append((Z @ Z.T)[iu])
    grams = np.array(grams)
    mean, sd = grams.mean(axis=0), grams.std(axis=0, ddof=1)
    assert np.abs(mean - K[iu]).mean() < 0.25 * sd.mean()
    t = (mean - K[iu]) / (sd / np.sqrt(len(grams)))
    if sampling == "fastfood":
        assert (t**2).mean() < 1.5 and np.abs(t).max() < 5.0


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("feature_map", ["cossin", "cos"])
def test_error_shrinks_like_one_over_root_D(sampling, feature_map):
    X = data(60, 40, seed=5)
    K = kernel_matrix(X, gamma=0.5)
    errs = []
    for D in (256, 4096):
        e = []
        for seed in range(4):
            draw, mult, b = make_case(sampling, 40, D, feature_map, gamma=0.5, seed=seed)
            Z = structured_features(X, draw, mult, feature_map, D, b, 2)
            e.append(np.abs(Z @ Z.T - K).mean())
        errs.append(np.mean(e))
    # 16× the features: 4× less error in expectation; allow 2.8–5.7.
    assert 2.8 < errs[0] / errs[1] < 5.7, errs
    assert np.allclose(np.diag(Z @ Z.T), 1.0, atol=0.2 if feature_map == "cos" else 1e-6)


def test_sorf_matches_orthogonal_and_fastfood_iid_error():
    # At equal D, SORF's error is that of orthogonal features and Fastfood's
    # within a modest factor of i.i.d. features (fixed seeds; means of 6).
    from randfeat import RandomFourierFeatures

    X = data(150, 100, seed=7)
    K = kernel_matrix(X, gamma=0.5)

    def err(make):
        return np.mean([np.abs((Z := make(s)) @ Z.T - K).mean() for s in range(6)])

    def structured(sampling):
        def make(seed):
            draw, mult, b = make_case(sampling, 100, 1024, gamma=0.5, seed=seed)
            return structured_features(X, draw, mult, "cossin", 1024, b, 2)
        return make

    def dense(sampling):
        return lambda s: RandomFourierFeatures(1024, gamma=0.5, sampling=sampling, random_state=s).fit_transform(X)

    sorf, ff = err(structured("sorf")), err(structured("fastfood"))
    orth, iid = err(dense("orthogonal")), err(dense("iid"))
    assert sorf < 1.15 * orth, (sorf, orth)
    assert ff < 1.5 * iid, (ff, iid)
    assert orth < iid


def test_gamma_enters_only_through_the_multipliers():
    spec = KERNELS["matern"]
    draw = draw_structured(spec, "fastfood", 20, 100, 2.5, np.random.default_rng(0))
    for gamma in (0.01, 1.0, 37.0):
        np.testing.assert_array_equal(multipliers(spec, draw, gamma), draw.radial * np.sqrt(2.0 * gamma))


def test_trig_floor_is_the_epilogue_alone():
    a = np.random.default_rng(0).uniform(-3, 3, 37).astype(np.float32)
    out = np.empty((11, 74), dtype=np.float32)
    _structured_fast.trig_floor(a, out, 0.25, 2)
    x, s = a.copy(), np.empty_like(a)
    _fourier_fast.sincos(x, s, 0.25)
    np.testing.assert_array_equal(out, np.tile(np.concatenate([x, s]), (11, 1)))


@pytest.mark.skipif(not (BENCH / "structured.py").exists(), reason="bench/ not next to tests/")
def test_bench_scripts_run_at_tiny_size(tmp_path):
    proc = run_bench("structured.py", "--tiny", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (tmp_path / "structured_tiny.md").read_text()
    for method in ("floor", "sorf", "fastfood", "orthogonal", "iid", "RBFSampler"):
        assert method in md
    assert (tmp_path / "structured_tiny.png").stat().st_size > 0
    rows = (tmp_path / "structured_tiny.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2 * 2 * 6  # dtypes × d × thread counts × methods
    proc = run_bench("approx_error.py", "--tiny", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (tmp_path / "approx_error_dims_tiny.md").read_text()
    assert "sorf / orthogonal" in md and "digits" in md and "patches 8x8" in md
    assert "sorf" in (tmp_path / "approx_error_tiny.csv").read_text()
