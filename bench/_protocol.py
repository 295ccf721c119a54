"""Table 1's protocol for one data set: select, cap or skip, then time every method's fit.

Phase 1 chooses each method's hyper-parameters (``_selection.select``, timed:
``selection_seconds``; or the choice of the row it shares a model with), caps the rows of a method whose
float64 feature matrix would exceed the memory budget, and skips the exact
kernel machine when its extrapolated fit time or kernel matrix exceeds the
budget.  Phase 2 fits the chosen models on the training rows, methods
alternating within each round (wall time; peak memory added by the fit) and
scores them on the test rows.
"""

import math
import time

import numpy as np

from _harness import fmt_bytes, fmt_seconds, progress, timed
from _selection import predict_chunked, score, select


def estimate_exact_seconds(method, task, params, seed, n_full):
    """Time fits on two subsamples; extrapolate with the measured exponent clipped to [2, 3].

    The lower clip is 2 because an exact kernel machine evaluates Θ(n²) kernel
    entries at least: KernelRidge forms the n × n matrix, and an SVM keeps a
    number of support vectors that grows linearly with n on noisy data
    (Steinwart 2003, "Sparseness of support vector machines"), each needing
    its kernel row.  On subsamples of a few thousand rows fixed costs flatten
    the measured exponent (1.7 measured on the Forest-like set), which would
    make a several-hour fit look like minutes.
    """
    n1 = max(50, min(1000, n_full // 8))
    n2 = 2 * n1
    times = []
    for n in (n1, n2):
        est = method.make(task, params, n, seed)
        t = time.perf_counter()
        est.fit(task.X_train[:n], task.y_train[:n])
        times.append(max(time.perf_counter() - t, 1e-4))
    e = float(np.clip(math.log(times[1] / times[0], 2), 2.0, 3.0))
    return times[1] * (n_full / n2) ** e, {"n": [n1, n2], "seconds": times, "exponent": e}


def source_has_params(rows, method):
    return bool(method.params_of and rows.get(method.params_of, {}).get("params"))


def row_cap(method, task, budget_bytes, caps):
    """Rows this method may train on, and why (None: all rows)."""
    if method.pair_with:
        return caps.get(method.pair_with, (None, None))
    if method.dense_width is None:
        return None, None
    width = method.dense_width(task)
    per_row = 3 * 8 * width  # features + centred copy + headroom, float64
    cap = int(budget_bytes // per_row)
    if cap >= task.n_train:
        return None, None
    need = task.n_train * 8 * width
    return cap, (f"trained on the first {cap:,} of {task.n_train:,} rows: its {task.n_train:,}×{width} float64 "
                 f"feature matrix alone is {fmt_bytes(need)} (memory budget {fmt_bytes(budget_bytes)})")


def run_task(task, methods, profile, *, seed=0, repeats=1, mem_budget_gb=6.0):
    """Run one task through every method: select, cap or skip, then timed fits alternating.

    Returns {"task": task.describe(), "rows": [one record per method], and
    "gram_floor_seconds" when the Fourier comparison ran}.
    """
    budget = mem_budget_gb * 1e9
    rows, caps, chosen = {}, {}, {}
    # Phase 1: model selection (and caps, skips) for every method.
    for m in methods:
        rec = {"method": m.key, "label": m.label, "size": m.size(task), "status": "ok", "note": ""}
        rows[m.key] = rec
        if m.pair_with and caps.get(m.pair_with, (None, None))[0] is None:
            rec.update(status="omitted", note=f"{m.pair_with} used all rows: same as the main row")
            continue
        cap, why = row_cap(m, task, budget, caps)
        caps[m.key] = (cap, why)
        if m.pair_with and cap is not None:
            why = f"trained on the first {cap:,} rows, as the capped baseline, for a like-for-like comparison"
        if source_has_params(rows, m):
            why = (why + "; " if why else "") + f"hyper-parameters as chosen for {rows[m.params_of]['label']}"
        source = rows.get(m.params_of) if m.params_of else None
        sel_s = None
        if source is not None and source.get("params"):
            best, tried, n_sel = source["params"], [], source["n_sel"]  # same model: same choice
        else:
            try:
                best, tried, n_sel, sel_s = select(m, task, profile, seed)
            except MemoryError as exc:  # pragma: no cover - depends on the machine
                rec.update(status="failed", note=f"MemoryError in selection: {exc}")
                continue
        rec.update(params=best, n_sel=n_sel, grid=[{"params": p, "val_error": e} for p, e in tried],
                   selection_seconds=sel_s)
        n_fit = task.n_train if cap is None else cap
        rec["n_train_used"] = n_fit
        rec["note"] = why or ""
        if m.exact:
            n2 = float(n_fit) ** 2
            krr_bytes = 2 * 8 * n2 if task.kind == "regression" else 0
            if krr_bytes > budget:
                rec.update(status="skipped", note=f"skipped: the {n_fit:,}² kernel matrix needs {fmt_bytes(krr_bytes)}")
                continue
            est_s, detail = estimate_exact_seconds(m, task, best, seed, n_fit)
            rec["estimate"] = {"seconds": est_s, **detail}
            if est_s > profile["exact_budget_s"]:
                rec.update(status="skipped", note=(
                    f"skipped: estimated {fmt_seconds(est_s)} (fits timed on n={detail['n'][0]} and "
                    f"{detail['n'][1]}, time ∝ n^{detail['exponent']:.1f}; budget {fmt_seconds(profile['exact_budget_s'])})"))
                progress(f"{task.name}: {m.label}: {rec['note']}")
                continue
        chosen[m.key] = (m, best, n_fit)
    # Phase 2: timed fits on the training rows, methods alternating per round.
    predictions = {}
    for r in range(repeats):
        for key, (m, best, n_fit) in chosen.items():
            rec = rows[key]
            progress(f"{task.name}: {m.label}: fit on {n_fit:,} rows (round {r + 1}/{repeats})")
            est = m.make(task, best, n_fit, seed)
            try:
                _, secs, mem = timed(est.fit, task.X_train[:n_fit], task.y_train[:n_fit])
            except MemoryError as exc:  # pragma: no cover
                rec.update(status="failed", note=f"MemoryError: {exc}")
                continue
            rec.setdefault("fit_seconds_all", []).append(secs)
            rec["peak_mem_bytes"] = max(rec.get("peak_mem_bytes", 0), mem)
            if r == 0:
                t = time.perf_counter()
                pred = predict_chunked(est, task.X_test)
                rec["predict_seconds"] = time.perf_counter() - t
                rec["test_error"] = score(task, task.y_test, pred)
                # The row's own predictions, fingerprinted: rows that tie on the error can be told apart.
                rec["predictions_sha1"] = predictions_sha1(pred)
                predictions[key] = pred
                progress(f"{task.name}: {m.label}: test error {rec['test_error']:.2f}%, fit {fmt_seconds(secs)}, "
                         f"peak +{fmt_bytes(mem)}")
            del est
    for key in chosen:
        rec = rows[key]
        if "fit_seconds_all" in rec:
            rec["fit_seconds"] = float(np.median(rec["fit_seconds_all"]))
    note_ties(rows, predictions)
    result = {"task": task.describe(), "rows": [rows[m.key] for m in methods]}
    floor = gram_floor_seconds(rows, task, repeats)
    if floor is not None:
        result["gram_floor_seconds"] = floor
    return result


def predictions_sha1(pred):
    """SHA-1 of a row's test predictions (their dtype, shape and bytes)."""
    import hashlib

    pred = np.ascontiguousarray(pred)
    return hashlib.sha1(f"{pred.dtype.str}{pred.shape}".encode() + pred.tobytes()).hexdigest()


def note_ties(rows, predictions):
    """Note on each row whose test error equals another's how many of their test predictions differ.

    Two models of one kernel (RBFSampler and Nystroem at the same gamma and
    alpha) can tie on the count of errors while predicting different rows:
    the note says so, so that a tie is not read as one model's predictions
    reported twice.
    """
    keys = [k for k in predictions if "test_error" in rows[k]]
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if rows[a]["test_error"] != rows[b]["test_error"] or predictions[a].shape != predictions[b].shape:
                continue
            differ = int(np.count_nonzero(np.asarray(predictions[a]) != np.asarray(predictions[b])))
            for one, other in ((a, b), (b, a)):
                tie = (f"same test error as {rows[other]['label']}, {differ:,} of {len(predictions[a]):,} test "
                       f"predictions differing (its own model)")
                rows[one]["note"] = f"{rows[one]['note']}; {tie}" if rows[one].get("note") else tie


def gram_floor_seconds(rows, task, repeats):
    """Time of a bare float64 syrk (NumPy ``Z.T @ Z``) of the Fourier comparison's N × D features.

    Both Fourier+LS and RBFSampler+Ridge must form this N·D² Gram matrix;
    measured in the same run, it bounds how much faster either can train.
    Returns None when the comparison did not run.
    """
    base = rows.get("sk_rbf_sampler", {})
    if "fit_seconds" not in base:
        return None
    n = base.get("n_train_used") or task.n_train
    Z = np.random.default_rng(0).standard_normal((n, task.D))
    progress(f"{task.name}: Gram floor: bare float64 syrk of {n:,} × {task.D}")
    times = []
    for _ in range(max(1, repeats)):
        t = time.perf_counter()
        Z.T @ Z
        times.append(time.perf_counter() - t)
    return float(np.median(times))
