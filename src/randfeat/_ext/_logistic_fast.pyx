# cython: language_level=3
"""The binary logistic loss and its gradient in one pass over dense float64 rows.

A loss/gradient evaluation needs the scores f = Zw + b (a pass over Z) and
then Zᵀr for the residuals r = s·(σ(f) − y) (a second pass).  Each row's
residual depends only on its own score, so both can be done row by row
while the row is in L1: Z is read from memory once instead of twice (the
held features of a logistic fit are far larger than the caches).

The rows are cut into chunks of a fixed number of rows (never dependent on
the thread count); each chunk writes its own partial loss, gradient and
residual sum, which the caller adds in chunk order, so the result is the
same for any thread count.  A row's score is the row-independent dot
product of ``row_products`` (the same bits).  Callers pass validated,
C-contiguous input; the chunks run on ``_openmp.ChunkLoop``.
"""

cimport cython
from libc.math cimport exp, fabs, log1p
from libc.stdint cimport int64_t
from libc.string cimport memset

from ._openmp cimport ChunkLoop

import numpy as np

cdef extern from "randfeat_rowgemm.h" nogil:
    void rf_rows_dot_f64(const double *X, int64_t sxi, int64_t sxk, int64_t d, const double *w,
                         double *out, int64_t ld_out, int64_t n, double *pad)
    int rf_rowgemm_init()

cdef int _ROWGEMM_ISA = rf_rowgemm_init()

# Rows per chunk: fixed, so the partial sums (and the result) never depend on
# the thread count; 256 rows of a few hundred features are ~1 ms of work.
cdef enum:
    _CHUNK_ROWS = 256


def n_chunks(Py_ssize_t n_rows):
    """Number of chunks (rows of the partial-sum arrays) ``binary_logistic_pass`` uses for ``n_rows`` rows."""
    return (n_rows + _CHUNK_ROWS - 1) // _CHUNK_ROWS


cdef class _BinaryPass(ChunkLoop):
    cdef const double *Z
    cdef const double *coef
    cdef const double *y
    cdef const double *w
    cdef double *F
    cdef double *part_loss
    cdef double *part_grad
    cdef double *part_resid
    cdef double intercept
    cdef int64_t n_rows, d

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.cdivision(True)
    cdef void run_chunk(self, Py_ssize_t chunk, void *scratch) noexcept nogil:
        cdef int64_t r0 = chunk * _CHUNK_ROWS, n = min(self.n_rows - r0, <int64_t>_CHUNK_ROWS)
        cdef int64_t d = self.d, i, j
        cdef double *g = self.part_grad + chunk * d
        cdef const double *z
        cdef double f, e, p, r, loss = 0.0, resid = 0.0
        memset(g, 0, d * sizeof(double))
        for i in range(r0, r0 + n):
            z = self.Z + i * d
            rf_rows_dot_f64(z, d, 1, d, self.coef, &self.F[i], 1, 1, NULL)
            f = self.F[i] + self.intercept
            self.F[i] = f
            # log(1 + e^f) and σ(f) without overflow for any f.
            e = exp(-fabs(f))
            loss = loss + self.w[i] * ((f if f > 0.0 else 0.0) + log1p(e) - self.y[i] * f)
            p = 1.0 / (1.0 + e) if f >= 0.0 else e / (1.0 + e)
            r = self.w[i] * (p - self.y[i])
            resid = resid + r
            for j in range(d):  # the row is still in L1
                g[j] = g[j] + r * z[j]
        self.part_loss[chunk] = loss
        self.part_resid[chunk] = resid


def binary_logistic_pass(
    const double[:, ::1] Z,
    const double[::1] coef,
    double intercept,
    const double[::1] y,
    const double[::1] w,
    double[::1] F,
    double[::1] part_loss,
    double[:, ::1] part_grad,
    double[::1] part_resid,
    int n_threads,
):
    """Scores, and per-chunk partial loss, gradient and residual sums of the binary logistic loss.

    For each row i: F[i] = z_i·coef + intercept, its loss term
    w_i·(log(1 + e^{F_i}) − y_i·F_i) and residual r_i = w_i·(σ(F_i) − y_i).
    Chunk c (rows 256·c to 256·c + 255) writes Σ loss terms into
    ``part_loss[c]``, Σ r_i z_i into ``part_grad[c]`` and Σ r_i into
    ``part_resid[c]``, each summed in row order; the caller adds the chunks
    in order, so the totals do not depend on ``n_threads``.

    Parameters
    ----------
    Z : (N, d) float64, C-contiguous
    coef : (d,) float64
    intercept : float
    y : (N,) float64, 0.0 or 1.0
    w : (N,) float64
    F : (N,) float64, overwritten with the scores
    part_loss, part_resid : (n_chunks(N),) float64, overwritten
    part_grad : (n_chunks(N), d) float64, overwritten
    n_threads : int
        OpenMP threads; the result does not depend on it.
    """
    cdef Py_ssize_t N = Z.shape[0], d = Z.shape[1], C = n_chunks(Z.shape[0])
    cdef _BinaryPass loop = _BinaryPass()
    if coef.shape[0] != d or y.shape[0] != N or w.shape[0] != N or F.shape[0] != N:
        raise ValueError("inconsistent shapes of Z, coef, y, w and F")
    if part_loss.shape[0] != C or part_resid.shape[0] != C or part_grad.shape[0] != C or part_grad.shape[1] != d:
        raise ValueError("the partial-sum arrays need n_chunks(N) rows (and d columns)")
    if N == 0:
        return
    if d == 0:
        # No features: the scores are the intercept; the loop below needs a row to point at.
        Z = np.zeros((N, 1))
        coef = np.zeros(1)
        part_grad = np.zeros((C, 1))
    loop.Z, loop.coef, loop.y, loop.w, loop.F = &Z[0, 0], &coef[0], &y[0], &w[0], &F[0]
    loop.part_loss, loop.part_grad, loop.part_resid = &part_loss[0], &part_grad[0, 0], &part_resid[0]
    loop.intercept, loop.n_rows, loop.d = intercept, N, Z.shape[1]
    loop.n_chunks, loop.n_threads = C, max(1, n_threads)
    loop.run()
