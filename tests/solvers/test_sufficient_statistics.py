"""Sufficient statistics of the direct ridge path (``_solvers/stats.py``) and the solution object (``_solvers/cholesky.py``)."""

import dataclasses
import pickle

import numpy as np
import pytest
import scipy.linalg

import randfeat._solvers.stats as stats_mod
from randfeat import Ridge
from randfeat._solvers.cholesky import RidgeSolution
from randfeat._solvers.stats import RidgeStatistics, StatisticsAccumulator

ALPHA = 0.1


def problem(n=300, D=10, K=2, offset=0.0, weighted=True, seed=0):
    """Features with column offsets ``offset·(1 + j)``, targets with an offset of 1e3, weights with a zero."""
    rng = np.random.default_rng(seed)
    Z = offset * (1.0 + np.arange(D)) + rng.standard_normal((n, D))
    Y = Z @ rng.standard_normal((D, K)) + rng.standard_normal((n, K)) + 1e3
    w = None
    if weighted:
        w = rng.uniform(0.2, 3.0, n)
        w[5] = 0.0
    return Z, Y, w


def exact_reference(Z, Y, w, alpha, fit_intercept=True):
    """Ridge in float64 with centring made exact by a second pass (mean of the centred data removed too)."""
    Z = Z.astype(np.float64)
    w = np.ones(len(Z)) if w is None else w
    sw = w.sum()
    if fit_intercept:
        mu = w @ Z / sw
        Zc = Z - mu
        correction = w @ Zc / sw
        Zc -= correction
        mu = mu + correction
        ybar = w @ Y / sw
        Yc = Y - ybar
        y_corr = w @ Yc / sw
        Yc -= y_corr
        ybar = ybar + y_corr
    else:
        Zc, Yc, mu, ybar = Z, Y, np.zeros(Z.shape[1]), np.zeros(Y.shape[1])
    G = Zc.T @ (w[:, None] * Zc)
    b = Zc.T @ (w[:, None] * Yc)
    coef = scipy.linalg.solve(G + alpha * np.eye(Z.shape[1]), b, assume_a="pos").T
    return dict(coef=coef, intercept=ybar - coef @ mu, G=G, b=b, mu=mu, ybar=ybar, yss=np.einsum("i,ik->k", w, Yc**2))


def rel(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max()


def blocks_of(Z, Y, w, bounds):
    return [RidgeStatistics.from_block(Z[s:e], Y[s:e], None if w is None else w[s:e])
            for s, e in zip(bounds[:-1], bounds[1:])]


def merge_sequential(parts):
    out = parts[0]
    for p in parts[1:]:
        out = out.merge(p)
    return out


def merge_tree(parts):
    parts = list(parts)
    while len(parts) > 1:
        parts = [parts[i].merge(parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def merge_reversed(parts):
    out = parts[-1]
    for p in parts[-2::-1]:
        out = p.merge(out)
    return out


UNEVEN = [0, 1, 8, 100, 103, 104, 250, 300]
GROUPINGS = {
    "whole": lambda Z, Y, w: RidgeStatistics.from_block(Z, Y, w),
    "sequential-uneven": lambda Z, Y, w: merge_sequential(blocks_of(Z, Y, w, UNEVEN)),
    "tree-uneven": lambda Z, Y, w: merge_tree(blocks_of(Z, Y, w, UNEVEN)),
    "reversed-uneven": lambda Z, Y, w: merge_reversed(blocks_of(Z, Y, w, UNEVEN)),
    "sequential-rows": lambda Z, Y, w: merge_sequential(blocks_of(Z, Y, w, list(range(len(Z) + 1)))),
    "tree-rows": lambda Z, Y, w: merge_tree(blocks_of(Z, Y, w, list(range(len(Z) + 1)))),
}


# ------------------------------------------------------------------ merging
@pytest.mark.parametrize("grouping", sorted(GROUPINGS))
@pytest.mark.parametrize("offset", [0.0, 1e3, 1e6])
@pytest.mark.parametrize("weighted", [True, False])
def test_any_grouping_gives_the_solution_of_the_whole(grouping, offset, weighted):
    Z, Y, w = problem(offset=offset, weighted=weighted)
    ref = exact_reference(Z, Y, w, ALPHA)
    stats = GROUPINGS[grouping](Z, Y, w)
    sol = stats.solve(ALPHA)
    assert rel(sol.coef, ref["coef"]) < 1e-12
    assert rel(sol.intercept, ref["intercept"]) < 1e-12
    # The statistics themselves: what RidgeCV will eigendecompose.
    assert rel(stats.gram(), ref["G"]) < 1e-12
    assert rel(stats.cross, ref["b"]) < 1e-12
    assert rel(stats.y_sum_squares, ref["yss"]) < 1e-12
    assert rel(stats.mean, ref["mu"]) < 1e-13 and rel(stats.y_mean, ref["ybar"]) < 1e-13
    assert stats.n_samples == len(Z)
    assert stats.weight_sum == pytest.approx(len(Z) if w is None else w.sum(), rel=1e-14)


def test_pairwise_means_are_what_keeps_large_offsets_exact():
    # The same single-row merges with every mean rounded to one float64
    # after each step (what a merge of plain means would do) lose ~10
    # digits at a 1e6 offset: the (shift, offset) pairs are needed.
    Z, Y, w = problem(offset=1e6)
    ref = exact_reference(Z, Y, w, ALPHA)

    def rounded(s):
        s.shift, s.mean_offset = s.mean, np.zeros_like(s.mean_offset)
        s.y_shift, s.y_mean_offset = s.y_mean, np.zeros_like(s.y_mean_offset)
        return s

    parts = blocks_of(Z, Y, w, list(range(len(Z) + 1)))
    plain = rounded(parts[0])
    for p in parts[1:]:
        plain = rounded(plain.merge(rounded(p)))
    assert rel(plain.solve(ALPHA).coef, ref["coef"]) > 1e-11
    assert rel(merge_sequential(blocks_of(Z, Y, w, list(range(len(Z) + 1)))).solve(ALPHA).coef, ref["coef"]) < 1e-12


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_streamed_accumulator_with_folds_and_mixed_shifts(fit_intercept, monkeypatch):
    # Half the rows near 0 (blocks go to syrk unshifted), half at 1e3
    # (shifted); folds of the deferred corrections every 3 blocks.
    monkeypatch.setattr(stats_mod, "MAX_PENDING", 3)
    rng = np.random.default_rng(3)
    Z = rng.standard_normal((400, 8))
    Z[200:] += 1e3
    Y = Z @ rng.standard_normal((8, 3)) + rng.standard_normal((400, 3))
    w = rng.uniform(0.5, 2.0, 400)
    acc = StatisticsAccumulator(8, 3, np.float64, fit_intercept, 1)
    for s, e in zip([0, 7, 50, 51, 130, 200, 260, 333], [7, 50, 51, 130, 200, 260, 333, 400]):
        acc.add(Z[s:e], Y[s:e], w[s:e])
    stats = acc.statistics()
    ref = exact_reference(Z, Y, w, ALPHA, fit_intercept=fit_intercept)
    assert stats.centred == fit_intercept
    assert rel(stats.gram(), ref["G"]) < 1e-13
    assert rel(stats.cross, ref["b"]) < 1e-13
    # The half-and-half offset makes one direction of G ~1e6 times the
    # others: the solutions (ours and the reference) agree to rounding
    # amplified by that condition number.
    cond = np.linalg.cond(ref["G"] + ALPHA * np.eye(8))
    assert rel(stats.solve(ALPHA).coef, ref["coef"]) < 1e-15 * cond


def test_fixed_merge_order_is_bit_identical_and_thread_count_free():
    Z, Y, w = problem(n=3000, D=40, offset=1e3)
    runs = []
    for n_threads in (1, 2, 1):
        parts = [RidgeStatistics.from_block(Z[s : s + 500], Y[s : s + 500], w[s : s + 500], n_threads=n_threads)
                 for s in range(0, 3000, 500)]
        runs.append(merge_tree(parts))
    for other in runs[1:]:
        assert np.array_equal(np.tril(runs[0].gram_lower), np.tril(other.gram_lower))
        assert np.array_equal(runs[0].cross, other.cross)
        assert np.array_equal(runs[0].solve(ALPHA).coef, other.solve(ALPHA).coef)


def test_empty_and_zero_weight_statistics_are_identities():
    Z, Y, w = problem()
    whole = RidgeStatistics.from_block(Z, Y, w)
    empty = RidgeStatistics.empty(Z.shape[1], Y.shape[1], np.float64)
    zero = RidgeStatistics.from_block(Z[:10], Y[:10], np.zeros(10))
    for left, right in ((empty, whole), (whole, empty), (zero, whole), (whole, zero)):
        merged = left.merge(right)
        assert np.array_equal(merged.solve(ALPHA).coef, whole.solve(ALPHA).coef)
    assert whole.merge(zero).n_samples == len(Z) + 10


def test_merge_rejects_mismatched_statistics():
    Z, Y, w = problem()
    a = RidgeStatistics.from_block(Z, Y, w)
    with pytest.raises(ValueError, match="cannot merge"):
        a.merge(RidgeStatistics.from_block(Z[:, :5], Y, w))
    with pytest.raises(ValueError, match="cannot merge"):
        a.merge(RidgeStatistics.from_block(Z, Y, w, fit_intercept=False))


def test_statistics_pickle_round_trip():
    Z, Y, w = problem(offset=1e6)
    stats = merge_tree(blocks_of(Z, Y, w, UNEVEN))
    back = pickle.loads(pickle.dumps(stats))
    for name in ("gram_lower", "cross", "y_sum_squares", "shift", "mean_offset", "y_shift", "y_mean_offset"):
        assert np.array_equal(getattr(back, name), getattr(stats, name)), name
    assert (back.n_samples, back.weight_sum, back.centred, back.dtype) == (
        stats.n_samples, stats.weight_sum, stats.centred, stats.dtype)
    assert np.array_equal(back.solve(ALPHA).coef, stats.solve(ALPHA).coef)
    extra = RidgeStatistics.from_block(Z[:3], Y[:3], w[:3])
    assert np.array_equal(back.merge(extra).gram_lower, stats.merge(extra).gram_lower)


@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_float32_blocks_multiplied_in_float32_summed_in_float64(offset):
    Z, Y, w = problem(n=2000, D=20, offset=offset)
    Z32 = Z.astype(np.float32)
    stats = merge_tree([RidgeStatistics.from_block(Z32[s : s + 300], Y[s : s + 300], w[s : s + 300])
                        for s in range(0, 2000, 300)])
    assert stats.dtype == np.float32 and stats.gram_lower.dtype == np.float64
    ref = exact_reference(Z32, Y, w, ALPHA)
    assert rel(stats.solve(ALPHA).coef, ref["coef"]) < 2e-4


def test_solve_overwrite_consumes_the_statistics():
    Z, Y, w = problem()
    stats = RidgeStatistics.from_block(Z, Y, w)
    keep = stats.solve(ALPHA)
    assert stats.gram_lower is not None  # solve without overwrite leaves the statistics usable
    again = stats.solve(ALPHA, overwrite=True)
    assert np.array_equal(keep.coef, again.coef)
    with pytest.raises(ValueError, match="consumed"):
        stats.gram()


def test_estimator_streams_through_the_statistics():
    # Ridge's Cholesky path on chunks equals the statistics of the whole.
    Z, Y, w = problem(offset=1e3)
    est = Ridge(alpha=ALPHA, solver="cholesky", chunk_size=37).fit(Z, Y, sample_weight=w)
    sol = RidgeStatistics.from_block(Z, Y, w).solve(ALPHA)
    assert rel(est.coef_, sol.coef) < 1e-12
    assert rel(est.noise_variance_, sol.noise_variance) < 1e-12


# ----------------------------------------------------------------- solution
def test_solution_is_immutable():
    Z, Y, w = problem()
    sol = RidgeStatistics.from_block(Z, Y, w).solve(ALPHA)
    assert isinstance(sol, RidgeSolution)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sol.coef = np.zeros_like(sol.coef)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sol.alpha = 2.0
    for name in ("coef", "intercept", "noise_variance", "factor", "mean"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(sol, name)[0, ...] = 0.0
    back = pickle.loads(pickle.dumps(sol))
    assert np.array_equal(back.factor, sol.factor) and back.dof == sol.dof
    with pytest.raises(ValueError, match="read-only"):
        back.coef[0, 0] = 0.0


def test_solution_noise_and_predictive_variance_match_dense_formulas():
    Z, Y, w = problem(n=120, D=6)
    sol = RidgeStatistics.from_block(Z, Y, w).solve(ALPHA)
    ref = exact_reference(Z, Y, w, ALPHA)
    mu = ref["mu"]
    Zc = Z - mu
    A = Zc.T @ (w[:, None] * Zc) + ALPHA * np.eye(6)
    H_trace = np.trace(Zc @ np.linalg.solve(A, Zc.T * w))
    resid = Y - (Z @ ref["coef"].T + ref["intercept"])
    s2 = (w[:, None] * resid**2).sum(axis=0) / (len(Z) - H_trace - 1)
    assert sol.dof == pytest.approx(H_trace + 1, rel=1e-12)
    np.testing.assert_allclose(sol.noise_variance, s2, rtol=1e-10)
    Zt = np.random.default_rng(1).standard_normal((9, 6))
    q = np.einsum("ij,ji->i", Zt - mu, np.linalg.solve(A, (Zt - mu).T)) + 1 / w.sum()
    np.testing.assert_allclose(sol.predictive_variance(Zt), q[:, None] * s2, rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("D", [300, 1100, 2 * 512 + 37])
def test_tiled_gram_matches_reference_and_any_thread_count(dtype, D):
    # Fixed column tiles, each single-threaded: the same bits for 1, 2 or 3
    # threads (threaded OpenBLAS dsyrk differs with SkylakeX kernels at D =
    # 300); the lower triangle gains Zᵀ Z, the strictly upper part untouched.
    from randfeat._solvers.gram import _tiled_gram_add, gram_tile

    rng = np.random.default_rng(5)
    Z = rng.normal(size=(700, D)).astype(dtype)
    outs = []
    for n_threads in (1, 2, 3):
        out = np.full((D, D), 7.0, order="F")
        outs.append(_tiled_gram_add(Z, out, n_threads))
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    reference = Z.astype(np.float64).T @ Z.astype(np.float64) + 7.0
    lower = np.tril_indices(D)
    tol = (1e-4 if dtype == np.float32 else 1e-12) * np.abs(reference).max()
    np.testing.assert_allclose(outs[0][lower], reference[lower], rtol=0, atol=tol)
    assert np.all(outs[0][np.triu_indices(D, 1)] == 7.0)  # nothing above the diagonal is written
    assert gram_tile(D) >= 512 and gram_tile(D) % 128 == 0
