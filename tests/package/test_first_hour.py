"""Issue 33, part 4: a scikit-learn user's first hour without surprises.

Each test failed before the fix: partial_fit's verbose progress and its
reason when absent, the features= message, load_adult(as_frame=True),
show_config's vector path and OpenMP lines, the docs' version mentions,
the drop-ins in README and quick start, and offline math in the docs.
"""

import io
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_approximation import RBFSampler as SkRBFSampler
from sklearn.preprocessing import StandardScaler

import randfeat
from randfeat import (
    RandomBinningFeatures,
    RandomFourierFeatures,
    Ridge,
    RidgeClassifier,
    RidgeCV,
)

ROOT = Path(__file__).resolve().parents[2]
HAVE_DOCS = (ROOT / "docs" / "conf.py").exists()
DROP_INS = ("RBFSampler", "Nystroem", "SkewedChi2Sampler", "PolynomialCountSketch", "AdditiveChi2Sampler")


def _data(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


# ------------------------------------------------------------- partial_fit
@pytest.mark.parametrize("verbose", [1, 2])
def test_partial_fit_verbose_reports_each_block(verbose, capsys):
    X, y = _data()
    est = Ridge(features=RandomFourierFeatures(20, random_state=0), verbose=verbose)
    for s in range(0, 60, 20):
        est.partial_fit(X[s:s + 20], y[s:s + 20])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "partial_fit block" in line]
    assert len(lines) == 3, err
    assert "block 3: 60 rows so far" in lines[-1] and re.search(r"\d+\.\d+ s", lines[-1])
    assert lines[0].startswith("[Ridge]")


def test_partial_fit_silent_without_verbose(capsys):
    X, y = _data()
    RidgeClassifier().partial_fit(X, y > 0, classes=[False, True])
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("Est", [Ridge, RidgeClassifier])
def test_partial_fit_absent_with_binning_says_why(Est):
    est = Est(features=RandomBinningFeatures(5, random_state=0))
    assert not hasattr(est, "partial_fit")
    X, y = _data()
    with pytest.raises(AttributeError) as info:
        est.partial_fit(X, y > 0 if Est is RidgeClassifier else y)
    msg = str(info.value)
    assert f"This '{Est.__name__}' has no attribute 'partial_fit'" in msg
    assert "vocabulary" in msg and "learned from all the rows" in msg
    assert f"{Est.__name__}.fit" in msg and "Dask array" in msg


def test_partial_fit_absent_with_cg_says_why():
    with pytest.raises(AttributeError, match="solver='cg' cannot be updated incrementally"):
        Ridge(solver="cg").partial_fit(*_data())


# ------------------------------------------------------------- features= message
@pytest.mark.parametrize("Est", [Ridge, RidgeCV])
@pytest.mark.parametrize("value", ["rff", 3, object()])
def test_features_message_is_right_and_short(Est, value):
    with pytest.raises(ValueError) as info:
        Est(features=value).fit(*_data())
    msg = str(info.value)
    assert msg.startswith(f"The 'features' parameter of {Est.__name__} must be a randfeat feature map")
    assert "scikit-learn transformer" in msg  # accepted since issue 34 (TransformerMap)
    assert "randfeat._maps" not in msg and "contract" not in msg  # no private class path
    assert msg.count("must be") == 1 and msg.count("feature map") == 1  # said once
    assert len(msg) < 300


@pytest.mark.parametrize("value", [SkRBFSampler(n_components=20, random_state=0), StandardScaler()])
def test_a_scikit_learn_transformer_is_accepted(value):
    est = Ridge(features=value).fit(*_data())
    assert est.features_.n_features_out_ == (20 if isinstance(value, SkRBFSampler) else _data()[0].shape[1])


# ------------------------------------------------------------- load_adult
def test_load_adult_as_frame_return_X_y():
    pd = pytest.importorskip("pandas")
    from randfeat.datasets import load_adult

    X, y = load_adult(as_frame=True, return_X_y=True)
    csr, target = load_adult(return_X_y=True)
    assert isinstance(X, pd.DataFrame) and isinstance(y, pd.Series)
    assert X.shape == csr.shape == (32561, 123) and y.name == "target"
    assert all(isinstance(t, pd.SparseDtype) for t in X.dtypes)
    assert list(X.columns) == list(load_adult().feature_names)
    assert (sp.csr_matrix(X.sparse.to_coo()) != csr).nnz == 0
    np.testing.assert_array_equal(y.to_numpy(), target)
    bunch = load_adult(subset="test", as_frame=True)
    assert bunch.frame.shape == (16281, 124) and bunch.data.shape == (16281, 123)
    raw, _ = load_adult(encoding="raw", as_frame=True, return_X_y=True)
    assert raw.shape == (32561, 14)
    clf = RidgeClassifier().fit(X.iloc[:3000], y.iloc[:3000])  # a frame fits as the CSR does
    ref = RidgeClassifier().fit(csr[:3000], target[:3000])
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------- show_config
def _config_text():
    buf = io.StringIO()
    randfeat.show_config(file=buf)
    return buf.getvalue()


def test_show_config_prints_one_vector_path_line():
    text = _config_text()
    paths = randfeat.get_config()["vector_paths"]
    lines = [line for line in text.splitlines() if line.strip().startswith("vector path")]
    if len(set(paths.values())) <= 1:
        assert len(lines) == 1, text
        if paths:
            assert f"all {len(paths)} kernel modules" in lines[0]
    else:  # differing paths: one line per path, naming its modules
        assert len(lines) == len(set(paths.values()))
    for name in paths:
        assert text.count(name) <= 1


def test_show_config_vector_paths_differing_are_named(monkeypatch):
    from randfeat._core import config

    cfg = config.get_config()
    cfg["vector_paths"] = {"_fourier_fast": "avx2", "_binning_fast": "avx512", "_onehot_fast": "avx512"}
    monkeypatch.setattr(config, "get_config", lambda: cfg)
    buf = io.StringIO()
    config.show_config(file=buf)
    lines = [line for line in buf.getvalue().splitlines() if line.strip().startswith("vector path")]
    assert len(lines) == 2
    assert any("avx512: _binning_fast, _onehot_fast" in line for line in lines)


def test_show_config_labels_each_openmp_runtime(monkeypatch):
    from randfeat._core import config

    cfg = config.get_config()
    cfg["openmp_runtime"] = [
        dict(prefix="libgomp", version=None, used_by_randfeat=True, num_threads=2,
             filepath="/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0"),
        dict(prefix="libgomp", version=None, used_by_randfeat=False, num_threads=2,
             filepath="/venv/lib/python3.11/site-packages/scikit_learn.libs/libgomp-e985bcbb.so.1.0.0"),
    ]
    monkeypatch.setattr(config, "get_config", lambda: cfg)
    buf = io.StringIO()
    config.show_config(file=buf)
    text = buf.getvalue()
    assert "[randfeat's kernels]" in text and "[scikit-learn]" in text
    assert "scikit-learn ships its own" in text and "harmless" in text
    assert "[other package]" not in text


# ------------------------------------------------------------- documentation
pytestmark_docs = pytest.mark.skipif(not HAVE_DOCS, reason="no docs/ next to tests/")


@pytestmark_docs
def test_no_mention_of_a_version_0_2():
    # The package is 0.1.0: "since 0.2" / "before 0.2" named a release that does not exist.
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.rst"),
             *(ROOT / "docs").rglob("*.md"), *(ROOT / "src" / "randfeat").rglob("*.py")]
    bad = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in files for line in p.read_text(encoding="utf-8").splitlines()
           if re.search(r"\b(since|before|in|from) 0\.2\b", line)]
    assert not bad, bad


@pytestmark_docs
@pytest.mark.parametrize("page", ["README.md", "docs/quickstart.rst"])
def test_drop_ins_in_readme_and_quickstart(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    for name in DROP_INS:
        assert name in text, (page, name)
    assert "sklearn.kernel_approximation" in text


@pytestmark_docs
def test_docs_render_math_offline():
    conf = (ROOT / "docs" / "conf.py").read_text(encoding="utf-8")
    assert '"sphinx-mathjax-offline"' in conf
    assert "sphinx-mathjax-offline" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


@pytestmark_docs
def test_offline_math_build_uses_a_local_mathjax(tmp_path):
    pytest.importorskip("sphinx")
    import importlib.util

    if importlib.util.find_spec("sphinx-mathjax-offline") is None:
        pytest.skip("sphinx-mathjax-offline not installed (the docs extra)")
    from sphinx.cmd.build import build_main

    (tmp_path / "conf.py").write_text('extensions = ["sphinx.ext.mathjax", "sphinx-mathjax-offline"]\n')
    (tmp_path / "index.rst").write_text("Math\n====\n\n:math:`\\gamma \\|x - y\\|^2`\n")
    assert build_main(["-q", "-b", "html", str(tmp_path), str(tmp_path / "_build")]) == 0
    html = (tmp_path / "_build" / "index.html").read_text(encoding="utf-8")
    assert 'src="_static/mathjax/tex-chtml.js"' in html and "cdn" not in html.lower()
    assert (tmp_path / "_build" / "_static" / "mathjax" / "tex-chtml.js").exists()
