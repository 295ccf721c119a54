"""RandomFourierFeatures: the scikit-learn transformer.

Python does validation, random draws and the thread count; the fused kernel
in ``_fourier_fast`` computes the features.
"""


from sklearn.base import ClassNamePrefixFeaturesOutMixin
from sklearn.utils.validation import check_is_fitted

from ._base import RandomFeatureMap
from ._fourier_sampling import SAMPLINGS, sample_fourier_parameters
from ._fourier_transform import fourier_features
from ._kernels import KERNELS, check_gamma, check_nu, get_kernel, resolve_gamma
from ._threads import check_n_jobs, effective_n_threads
from ._validation import as_generator, check_choice, check_positive_int, validate_features_input

FEATURE_MAPS = ("cossin", "cos")


class RandomFourierFeatures(ClassNamePrefixFeaturesOutMixin, RandomFeatureMap):
    """Random Fourier features of a shift-invariant kernel (Rahimi & Recht, 2007).

    Maps X to Z with ``Z @ Z.T ≈ kernel_matrix(X, kernel=..., gamma=..., nu=...)``,
    so a linear model on Z approximates a kernel machine.  The features are
    computed by a fused, multithreaded kernel: one pass over the output, no
    N × D temporaries, float32 kept as float32.

    Parameters
    ----------
    n_components : int, default=100
        Output width D.  Must be even for ``feature_map='cossin'``.
    kernel : {'rbf', 'laplacian', 'cauchy', 'matern'}, default='rbf'
        Kernel approximated; see ``randfeat.kernel_matrix`` for the formulas.
    gamma : float or 'scale', default=1.0
        Kernel parameter as in ``sklearn.metrics.pairwise``.  ``'scale'``
        means ``1 / (n_features * X.var())`` as in scikit-learn's RBFSampler.
    nu : {0.5, 1.5, 2.5}, default=1.5
        Smoothness of the Matérn kernel; ignored by the other kernels.
    feature_map : {'cossin', 'cos'}, default='cossin'
        ``'cossin'``: ``z(x) = sqrt(1/D') [cos(Wᵀx), sin(Wᵀx)]`` with
        ``D' = D/2`` frequencies.  ``'cos'``: ``z(x) = sqrt(2/D) cos(Wᵀx + b)``
        with D frequencies and ``b ~ U[0, 2π)``.  ``'cossin'`` is the default
        because at equal output width it approximates the kernel with lower
        variance (Sutherland & Schneider, 2015): the random phase b of the
        ``cos`` map adds noise that the sin/cos pair cancels exactly.
    sampling : {'iid', 'orthogonal', 'qmc'}, default='iid'
        How the frequencies are drawn: i.i.d. from the spectral density;
        ``'orthogonal'``: Orthogonal Random Features (Yu et al., 2016), rows
        of stacked random orthogonal blocks rescaled to the density's radial
        norms (``rbf`` and ``matern`` only); ``'qmc'``: a scrambled Sobol
        sequence pushed through the inverse CDF of the density (Avron et al.,
        2016).  Both usually give a lower kernel error than ``'iid'`` at
        equal D.
    random_state : int, RandomState, Generator or None, default=None
        Seeds the draw of W and b.
    n_jobs : int or None, default=None
        Threads for ``transform``.  None or -1: all available cores.  The
        output is bit-identical whatever ``n_jobs`` is.

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features_in_, D') or (n_features_in_, D)
        Frequencies W, as columns (``D' = D/2`` for ``cossin``), in the dtype
        of the training data.
    random_offset_ : ndarray of shape (D,) or None
        Phases b of the ``cos`` map, in the training data's dtype; None for
        ``cossin``, which has no phase.
    gamma_ : float
        The numeric gamma used (resolves ``gamma='scale'``).
    n_features_in_ : int
        Number of input features seen in ``fit``.
    feature_names_in_ : ndarray of str
        Input feature names, when X had string column names.
    n_features_out_ : int
        Output width D.

    See Also
    --------
    sklearn.kernel_approximation.RBFSampler : the ``cos`` map, rbf only.
    randfeat.kernel_matrix : the exact kernel the features approximate.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat import RandomFourierFeatures, kernel_matrix
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> rff = RandomFourierFeatures(n_components=20000, gamma=0.5, random_state=0)
    >>> Z = rff.fit_transform(X)
    >>> Z.shape
    (5, 20000)
    >>> bool(np.abs(Z @ Z.T - kernel_matrix(X, gamma=0.5)).max() < 0.05)
    True
    """

    def __init__(
        self,
        n_components=100,
        *,
        kernel="rbf",
        gamma=1.0,
        nu=1.5,
        feature_map="cossin",
        sampling="iid",
        random_state=None,
        n_jobs=None,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.nu = nu
        self.feature_map = feature_map
        self.sampling = sampling
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check_params(self):
        spec = get_kernel(self.kernel)
        n_components = check_positive_int(self.n_components, "n_components")
        check_choice(self.feature_map, "feature_map", FEATURE_MAPS)
        check_choice(self.sampling, "sampling", SAMPLINGS)
        if self.feature_map == "cossin" and n_components % 2:
            raise ValueError(
                f"n_components must be even for feature_map='cossin' (half cos, half sin), "
                f"got {n_components}; use an even value or feature_map='cos'"
            )
        check_gamma(self.gamma)
        check_nu(self.kernel, self.nu)
        if self.sampling == "orthogonal" and spec.radial_norms is None:
            radial = sorted(k for k, s in KERNELS.items() if s.radial_norms is not None)
            raise ValueError(
                f"sampling='orthogonal' does not apply to kernel={self.kernel!r}: its spectral "
                f"density is not spherically symmetric (frequencies are independent per "
                f"coordinate); use it with {radial}, or sampling='iid' or 'qmc'"
            )
        check_n_jobs(self.n_jobs)
        return spec, n_components

    def fit(self, X, y=None):
        """Draw the random frequencies for inputs shaped like X.

        Only X's width (and, for ``gamma='scale'``, its variance) is used.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : RandomFourierFeatures
        """
        spec, n_components = self._check_params()
        X = validate_features_input(self, X, reset=True)
        dtype = X.dtype
        d = X.shape[1]
        self.gamma_ = resolve_gamma(self.gamma, X)
        cossin = self.feature_map == "cossin"
        n_freq = n_components // 2 if cossin else n_components
        W, b = sample_fourier_parameters(
            spec,
            self.sampling,
            d,
            n_freq,
            self.gamma_,
            self.nu,
            as_generator(self.random_state),
            with_offset=not cossin,
        )
        self.random_weights_ = W.astype(dtype, copy=False)
        self.random_offset_ = None if b is None else b.astype(dtype, copy=False)
        self.n_features_out_ = n_components
        return self

    @property
    def _n_features_out(self):
        # Read by ClassNamePrefixFeaturesOutMixin.get_feature_names_out.
        return self.n_features_out_

    def transform(self, X):
        """Compute the random Fourier features of X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Dense (any memory layout, read-only allowed) or sparse input.

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
            C-ordered, float32 for float32 input, float64 otherwise.
        """
        check_is_fitted(self, "random_weights_")
        X = validate_features_input(self, X, reset=False)
        n_threads = effective_n_threads(self.n_jobs)
        return fourier_features(
            X, self.random_weights_, self.random_offset_, self.feature_map == "cossin", n_threads
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
