"""The benchmark scripts run end to end at --tiny size, so the harness cannot rot.

Each script runs in a subprocess, as a user would run it; bench/ is found
relative to this file (the repository layout), so these tests skip cleanly
when the tests run from an installed copy without the bench/ folder.
"""

import csv
import json
import math

import numpy as np
import pytest
from _subprocess_env import BENCH
from _subprocess_env import run_bench as run

pytestmark = pytest.mark.skipif(not (BENCH / "table1.py").exists(), reason="bench/ not next to tests/")


@pytest.fixture(scope="module")
def tiny_table(tmp_path_factory):
    out = tmp_path_factory.mktemp("table1")
    proc = run("table1.py", "--tiny", "--out", out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def test_table1_tiny_writes_complete_finite_table(tiny_table):
    out, proc = tiny_table
    data = json.loads((out / "table1_tiny.json").read_text())
    assert [r["task"]["key"] for r in data["results"]] == ["adult-uci", "census", "adult", "forest"]
    for res in data["results"]:
        by = {r["method"]: r for r in res["rows"]}
        # The rows the paper's table and the issue ask for are all present...
        for key in ("rf_fourier", "rf_binning_4", "rf_binning_8", "sk_rbf_sampler", "sk_nystroem", "exact", "linear"):
            assert key in by, key
        # ...and every method that ran reports finite numbers and its choice.
        ran = [r for r in res["rows"] if r["status"] == "ok"]
        assert {"rf_fourier", "rf_binning_4", "rf_binning_8", "sk_rbf_sampler", "linear"} <= {r["method"] for r in ran}
        for r in ran:
            assert math.isfinite(r["test_error"]) and 0 <= r["test_error"]
            assert math.isfinite(r["fit_seconds"]) and r["fit_seconds"] > 0
            assert r["peak_mem_bytes"] >= 0
            assert r["params"]
            # Rows that reuse another row's choice for the same model have no grid of their own.
            assert r["grid"] or r["method"] in ("rf_fourier_paired", "sk_nystroem")
            if r["method"] != "linear":
                assert r["params"]["gamma"] > 0
        for r in res["rows"]:
            assert r["status"] in ("ok", "skipped", "omitted"), (r["method"], r["status"], r["note"])
    md = (out / "table1_tiny.md").read_text()
    for needle in ("Adult (UCI)", "Census-like", "Adult-like", "Forest-like", "randfeat Fourier+LS",
                   "RBFSampler+Ridge", "Rahimi & Recht (2007)", "11.6%", "Selection, every method alike"):
        assert needle in md
    assert "randfeat Fourier+LS" in proc.stdout and "total" in proc.stdout
    assert "Forest-like: randfeat Binning+LS" in proc.stderr  # progress lines


def test_table1_render_rewrites_the_same_markdown(tiny_table, tmp_path):
    out, _ = tiny_table
    copy = tmp_path / "again.json"
    copy.write_text((out / "table1_tiny.json").read_text())
    proc = run("table1.py", "--render", copy)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "again.md").read_text() == (out / "table1_tiny.md").read_text()


def test_table1_tiny_has_the_real_adult_row_beside_the_paper(tiny_table):
    out, proc = tiny_table
    data = json.loads((out / "table1_tiny.json").read_text())
    (res,) = [r for r in data["results"] if r["task"]["key"] == "adult-uci"]
    t = res["task"]
    # A subsample of each of the shipped files: 2000 training rows (10% held out), 2000 test rows.
    assert (t["name"], t["paper_key"], t["n_features"], t["sparse"]) == ("Adult (UCI)", "adult", 123, True)
    assert (t["n_train"] + t["n_val"], t["n_test"], t["n_classes"]) == (2000, 2000, 2)
    assert "load_adult" in t["source"]
    errs = {r["method"]: r["test_error"] for r in res["rows"] if r["status"] == "ok"}
    assert {"rf_fourier", "rf_binning_4", "rf_binning_8", "linear"} <= set(errs)
    # The random-feature models learn the real task: near the linear model (the
    # tiny run has D=48, P<=8 and 1,800 training rows) and clearly better than
    # predicting the majority class (about 24% positives in adult.test).
    for key in ("rf_fourier", "rf_binning_8"):
        assert errs[key] < errs["linear"] + 5.0, (key, errs)
        assert errs[key] < 22.0, (key, errs)
    # The paper's Adult numbers sit in the same table, under our row, and are compared.
    md = (out / "table1_tiny.md").read_text()
    table = next(block for block in md.split("\n\n") if block.startswith("| data set | Fourier+LS"))
    lines = table.splitlines()
    ours = next(i for i, line in enumerate(lines) if line.startswith("| Adult (UCI)"))
    assert lines[ours + 1].startswith("| ↳ paper: Adult") and "14.9%" in lines[ours + 1]
    assert "Against the paper on its own data (Adult (UCI)): Fourier+LS" in md and "vs 14.9%" in md
    assert "Standard error of a test error here" in proc.stdout


def _write_svmlight(path, n=300, seed=0):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    dump_svmlight_file(X, y, str(path))
    return X, y


def test_table1_data_svmlight(tmp_path):
    f = tmp_path / "small.svm"
    _write_svmlight(f)
    proc = run("table1.py", "--tiny", "--data", f, "--methods", "rf_fourier,linear,sk_rbf_sampler",
               "--out", tmp_path, "--tag", "svm")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "svm.json").read_text())
    (res,) = data["results"]
    assert res["task"]["kind"] == "classification" and res["task"]["n_features"] == 5
    assert res["task"]["n_train"] + res["task"]["n_val"] + res["task"]["n_test"] == 300
    errs = {r["method"]: r["test_error"] for r in res["rows"] if r["status"] == "ok"}
    assert set(errs) == {"rf_fourier", "linear", "sk_rbf_sampler"}
    # XOR-like labels: the kernel model must beat the linear one clearly.
    assert errs["rf_fourier"] < errs["linear"] - 10


def test_table1_data_npz_and_csv_regression(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((200, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(200)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    np.savetxt(tmp_path / "d.csv", np.column_stack([X, y]), delimiter=",", header="a,b,c,target", comments="")
    for name in ("d.npz", "d.csv"):
        proc = run("table1.py", "--tiny", "--data", tmp_path / name, "--methods", "linear", "--out", tmp_path,
                   "--tag", name.replace(".", "_"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        (res,) = json.loads((tmp_path / f"{name.replace('.', '_')}.json").read_text())["results"]
        assert res["task"]["kind"] == "regression" and res["task"]["n_features"] == 3


def _write_covtype_like_libsvm(path, labels, n=400, seed=0):
    """A small file in the format of LIBSVM's covtype files: integer labels, 1-based
    indices, zeros omitted; 10 raw continuous columns, then one-hot wilderness
    (4) and soil (40) columns, as covtype.libsvm.binary (labels 1/2) or covtype (1..7)."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        cont = rng.integers(0, 4000, size=10)
        cont[0] = 1800 + rng.integers(0, 2000)  # elevation, metres
        wild, soil = rng.integers(0, 4), rng.integers(0, 40)
        # Labels follow elevation bands, so there is something to learn.
        band = int((cont[0] - 1800) / 2000 * len(labels))
        y = labels[band] if rng.random() < 0.85 else labels[rng.integers(0, len(labels))]
        cells = [f"{j + 1}:{v}" for j, v in enumerate(cont) if v != 0]
        cells += [f"{11 + wild}:1", f"{15 + soil}:1"]
        lines.append(f"{y} " + " ".join(cells))
    lines[0] = lines[0].split(" ")[0] + " 1:2596 54:1"  # make sure the last column occurs
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("name, labels", [("covtype.libsvm.binary", (1, 2)), ("covtype", tuple(range(1, 8)))])
def test_table1_data_in_libsvm_covtype_format(tmp_path, name, labels):
    f = tmp_path / name
    _write_covtype_like_libsvm(f, labels)
    proc = run("table1.py", "--tiny", "--data", f, "--methods", "rf_fourier,rf_binning_4,linear",
               "--out", tmp_path, "--tag", "cov")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (res,) = json.loads((tmp_path / "cov.json").read_text())["results"]
    t = res["task"]
    assert (t["kind"], t["n_features"], t["n_classes"], t["paper_key"]) == ("classification", 54, len(labels), None)
    assert t["n_train"] + t["n_val"] + t["n_test"] == 400
    errs = {r["method"]: r["test_error"] for r in res["rows"] if r["status"] == "ok"}
    assert set(errs) == {"rf_fourier", "rf_binning_4", "linear"}
    # Labels follow elevation bands (15% noise): some method must do clearly better than chance.
    chance = 100 * (1 - 1 / len(labels))
    assert min(errs.values()) < chance - 10, errs


def test_table1_dataset_adult_is_the_shipped_copy_offline(tmp_path, monkeypatch):
    # No download: with every proxy pointing at a closed port the run still works.
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    proc = run("table1.py", "--tiny", "--dataset", "adult", "--max-rows", "800", "--methods", "rf_fourier,linear",
               "--out", tmp_path, "--tag", "adult")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (res,) = json.loads((tmp_path / "adult.json").read_text())["results"]
    t = res["task"]
    assert (t["key"], t["name"], t["paper_key"], t["n_features"]) == ("adult-uci", "Adult (UCI)", "adult", 123)
    assert (t["n_train"] + t["n_val"], t["n_test"]) == (800, 800)
    assert "load_adult" in t["source"]


@pytest.mark.parametrize(
    "content, suffix, message",
    [
        (None, ".svm", "no such file"),
        ("1 1:0.5 2:zz\n0 3:1\n", ".svm", "could not read it as an svmlight/libsvm file"),
        ("this is not\na data file\n", ".libsvm", "could not read it as an svmlight/libsvm file"),
        (b"not a zip", ".npz", "could not read it as an .npz file"),
        ("1,2\n3\n", ".csv", "could not read it as a CSV file"),
    ],
)
def test_table1_data_errors_are_clear(tmp_path, content, suffix, message):
    f = tmp_path / f"bad{suffix}"
    if isinstance(content, bytes):
        f.write_bytes(content)
    elif content is not None:
        f.write_text(content)
    proc = run("table1.py", "--tiny", "--data", f, "--out", tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and str(f.name) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_table1_npz_without_y_is_a_clear_error(tmp_path):
    np.savez(tmp_path / "noy.npz", X=np.zeros((5, 2)))
    proc = run("table1.py", "--tiny", "--data", tmp_path / "noy.npz", "--out", tmp_path)
    assert proc.returncode == 2 and "has no array y" in proc.stderr and "Traceback" not in proc.stderr


def test_table1_writes_outside_the_tracked_files_by_default():
    # README's first command runs table1.py without --out: on a fresh clone
    # `git status` must stay clean, so the default folder is bench/out/, which
    # .gitignore lists; --refresh-committed (maintainers) writes bench/results/.
    import shutil
    import subprocess
    import uuid

    tag = f"default_out_{uuid.uuid4().hex[:8]}"
    committed = sorted(p.name for p in (BENCH / "results").iterdir())
    try:
        proc = run("table1.py", "--tiny", "--sets", "census", "--methods", "linear", "--tag", tag)
        assert proc.returncode == 0, proc.stderr[-3000:]
        for suffix in (".md", ".json"):
            assert (BENCH / "out" / f"{tag}{suffix}").exists()
        assert f"bench/out/{tag}.md" in proc.stdout.replace("\\", "/")
        assert sorted(p.name for p in (BENCH / "results").iterdir()) == committed
        if shutil.which("git") and (BENCH.parent / ".git").exists():
            check = subprocess.run(["git", "check-ignore", "-q", str(BENCH / "out" / f"{tag}.md")], cwd=BENCH.parent)
            assert check.returncode == 0, "bench/out/ is not git-ignored"
    finally:
        for suffix in (".md", ".json"):
            (BENCH / "out" / f"{tag}{suffix}").unlink(missing_ok=True)
    proc = run("table1.py", "--tiny", "--out", "x", "--refresh-committed")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def test_approx_error_tiny(tmp_path):
    proc = run("approx_error.py", "--tiny", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    png = tmp_path / "approx_error_tiny.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(tmp_path / "approx_error_tiny.csv") as f:
        rows = list(csv.DictReader(f))
    combos = {(r["kernel"], r["feature_map"], r["sampling"]) for r in rows}
    for kernel in ("rbf", "laplacian", "cauchy", "matern"):
        for fmap in ("cos", "cossin"):
            assert (kernel, fmap, "iid") in combos and (kernel, fmap, "qmc") in combos
    assert ("rbf", "cos", "orthogonal") in combos and ("laplacian", "binning", "iid") in combos
    for r in rows:
        mean, mx = float(r["mean_abs_error"]), float(r["max_abs_error"])
        assert math.isfinite(mean) and math.isfinite(mx) and 0 <= mean <= mx <= 2.5
    # More features, smaller error: mean over seeds and configurations at 10 vs 100.
    small = np.mean([float(r["mean_abs_error"]) for r in rows if r["n_features"] == "10"])
    large = np.mean([float(r["mean_abs_error"]) for r in rows if r["n_features"] == "100"])
    assert large < 0.6 * small


def test_scaling_tiny(tmp_path):
    proc = run("scaling.py", "--tiny", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    png = tmp_path / "scaling_tiny.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(tmp_path / "scaling_tiny.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["sweep"] for r in rows} == {"N", "D", "d", "threads"}
    assert {(r["library"], r["op"]) for r in rows} == {("randfeat", "transform"), ("sklearn", "transform"),
                                                       ("randfeat-binning", "transform"), ("randfeat", "fit"),
                                                       ("sklearn", "fit")}
    for r in rows:
        assert math.isfinite(float(r["seconds"])) and float(r["seconds"]) > 0
        assert float(r["peak_bytes"]) >= 0
    assert {r["threads"] for r in rows if r["sweep"] == "threads"} == {"1", "2"}


def test_table1_memory_cap_is_reported_with_a_paired_row(tmp_path):
    proc = run("table1.py", "--tiny", "--sets", "forest", "--mem-budget-gb", "0.002", "--out", tmp_path, "--tag", "cap",
               "--methods", "rf_fourier,sk_rbf_sampler,rf_fourier_paired")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (res,) = json.loads((tmp_path / "cap.json").read_text())["results"]
    by = {r["method"]: r for r in res["rows"]}
    base, paired, main = by["sk_rbf_sampler"], by["rf_fourier_paired"], by["rf_fourier"]
    assert base["status"] == paired["status"] == main["status"] == "ok"
    assert base["n_train_used"] == paired["n_train_used"] < main["n_train_used"] == res["task"]["n_train"]
    assert "trained on the first" in base["note"] and "memory budget" in base["note"]
    assert paired["params"] == main["params"]
    assert "on the same" in (tmp_path / "cap.md").read_text()


def test_table1_dataset_without_network_is_a_clear_error(tmp_path, monkeypatch):
    # A proxy on a closed local port makes every download fail at once, with
    # or without a network; an empty data home means nothing is cached.
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path / "skdata"))
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    proc = run("table1.py", "--tiny", "--dataset", "covtype", "--out", tmp_path, timeout=300)
    assert proc.returncode == 2
    assert "could not download" in proc.stderr and "--data FILE" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_feature_draws_tiny_reports_every_set(tiny_table, tmp_path):
    out, _ = tiny_table
    proc = run("feature_draws.py", "--tiny", "--from", out / "table1_tiny.json", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(tmp_path / "feature_draws_tiny.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["set"] for r in rows} == {"Adult (UCI)", "Census-like", "Adult-like", "Forest-like"}
    for r in rows:
        assert int(r["draws"]) == 3
        values = [float(r[k]) for k in ("randfeat_mean", "randfeat_sd", "sklearn_mean", "sklearn_sd", "difference_se")]
        assert all(math.isfinite(v) for v in values)
        assert float(r["difference"]) == pytest.approx(float(r["randfeat_mean"]) - float(r["sklearn_mean"]))
    assert "difference / its SE" in (tmp_path / "feature_draws_tiny.md").read_text()


def test_feature_draws_without_results_is_a_clear_error(tmp_path):
    proc = run("feature_draws.py", "--tiny", "--from", tmp_path / "missing.json")
    assert proc.returncode != 0 and "not found" in proc.stderr


def test_table1_every_row_predicts_with_its_own_model(monkeypatch):
    # Issue 33: RBFSampler and Nystroem rows showed the same test error on two sets.  Each row's
    # predictions must be its own model's: refitting that row's model (seeded, deterministic) gives
    # the fingerprint the row records, the two kernel approximations predict differently, and a tie
    # on the error is noted with how many predictions differ.
    import sys

    monkeypatch.syspath_prepend(str(BENCH))
    for name in [m for m in sys.modules if m.startswith("_") and m[1:] in ("protocol", "methods", "tasks")]:
        monkeypatch.delitem(sys.modules, name)
    import _methods
    import _protocol
    import _selection
    import _tasks
    from _profiles import PROFILES

    from randfeat.datasets import make_adult_like

    profile = dict(PROFILES["tiny"])
    X, y = make_adult_like(600, random_state=0)
    task = _tasks.make_task("adult", "Adult-like", "classification", X, y, 40, "test", 0)
    keep = ("rf_fourier", "sk_rbf_sampler", "sk_nystroem", "linear")
    methods = [m for m in _methods.build_methods(profile) if m.key in keep]
    result = _protocol.run_task(task, methods, profile, seed=0)
    rows = {r["method"]: r for r in result["rows"]}
    by_key = {m.key: m for m in methods}
    for key in keep:
        rec = rows[key]
        assert rec["status"] == "ok", rec
        est = by_key[key].make(task, rec["params"], rec["n_train_used"], 0)
        est.fit(task.X_train[:rec["n_train_used"]], task.y_train[:rec["n_train_used"]])
        pred = _selection.predict_chunked(est, task.X_test)
        assert rec["predictions_sha1"] == _protocol.predictions_sha1(pred), key
        assert rec["test_error"] == _selection.score(task, task.y_test, pred), key
    assert rows["sk_rbf_sampler"]["predictions_sha1"] != rows["sk_nystroem"]["predictions_sha1"]
    # A tie between two rows is explained, not hidden.
    rows2 = {"a": {"label": "A", "test_error": 10.0, "note": ""}, "b": {"label": "B", "test_error": 10.0}}
    _protocol.note_ties(rows2, {"a": np.array([0, 1, 1, 0]), "b": np.array([1, 0, 1, 0])})
    assert "same test error as B, 2 of 4 test predictions differing" in rows2["a"]["note"]
