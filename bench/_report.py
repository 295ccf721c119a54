"""Table 1's report: the Markdown file and the console summary, with the paper's numbers.

Works from the JSON-able results of ``_protocol.run_task`` and the run's
metadata only, so ``table1.py --render`` can redraw an old run.
"""

import math

from _harness import fmt_bytes, fmt_seconds
from _selection import SVC_CS, fmt_params

# Rahimi & Recht, "Random Features for Large-Scale Kernel Machines", NIPS
# 2007, Table 1 (their data, their 2007 machine): error, training time, and
# the D / P used or the exact solver.  Census error is the paper's own
# regression error measure, not our normalised RMSE.  Transcribed from the
# published paper; check against it before quoting elsewhere.
PAPER_TABLE1 = {
    "census": {"Fourier+LS": "5%, 36 s (D=500)", "Binning+LS": "7.5%, 19 min (P=30)",
               "CVM": "8.8%, 7.5 min", "Exact SVM": "9%, 13 min (SVMTorch)"},
    "adult": {"Fourier+LS": "14.9%, 9 s (D=500)", "Binning+LS": "15.3%, 1.5 min (P=30)",
              "CVM": "14.8%, 73 min", "Exact SVM": "15.1%, 7 min (SVMlight)"},
    "forest": {"Fourier+LS": "11.6%, 71 min (D=5000)", "Binning+LS": "2.2%, 25 min (P=50)",
               "CVM": "2.3%, 7.5 h", "Exact SVM": "2.2%, 44 h (libSVM)"},
}
PAPER_SETS = {"census": "Census (regression, 18,000 × 119)", "adult": "Adult (32,000 × 123)",
              "forest": "Forest Cover (522,000 × 54)"}
PAPER_NOTE = (
    "Paper: Rahimi & Recht (2007), *Random Features for Large-Scale Kernel Machines*, NIPS 20, "
    "Table 1: the real Census / Adult / Forest Cover sets on a 2007 machine; CVM = Core Vector Machine. "
    "Rows marked \"(UCI)\" or fetched with --dataset are the paper's real data (Adult: the same a9a "
    "encoding and train/test split), so their errors compare with the paper's; the look-alike rows are "
    "synthetic: compare the ordering of methods there, not the numbers."
)


def paper_error(paper_key, column):
    """The paper's test error in % for a column ("Fourier+LS", "Binning+LS", ...), or None."""
    text = PAPER_TABLE1.get(paper_key, {}).get(column)
    return float(text.split("%")[0]) if text else None


def _paper_grids(paper_key):
    """The P of the paper's Binning+LS row: "15.3%, 1.5 min (P=30)" -> 30."""
    text = PAPER_TABLE1[paper_key]["Binning+LS"]
    return int(text.split("P=")[1].rstrip(")"))


def _err_label(kind):
    return "error (%)" if kind == "classification" else "NRMSE (%)"


def _cell(rec):
    if rec["status"] == "skipped":
        return rec["note"].split(" (")[0]  # "skipped: estimated 3.2 h"; details below
    if rec["status"] != "ok" or "test_error" not in rec:
        return rec["status"]
    return f"{rec['test_error']:.2f}%, {fmt_seconds(rec['fit_seconds'])}, {fmt_bytes(rec.get('peak_mem_bytes'))}"


def test_error_se(error_pct, n_test, kind):
    """Standard error, in points, of a test error measured on ``n_test`` rows.

    Classification: binomial, sqrt(p(1 − p) / n).  Regression (normalised
    RMSE of roughly Gaussian residuals): relative standard error about
    1/sqrt(2n).
    """
    if kind == "classification":
        p = error_pct / 100
        return 100 * math.sqrt(max(p * (1 - p), 1e-12) / n_test)
    return error_pct / math.sqrt(2 * n_test)


def selection_text(meta):
    """The selection procedure of a run, in one paragraph."""
    s = meta.get("settings", {})
    if not s:
        return ""
    mults = ", ".join(f"{m:g}" for m in s["gamma_mults"])
    lams = ", ".join(f"{lam:g}" for lam in s["lambdas"])
    cs = ", ".join(f"{c:g}" for c in SVC_CS)
    return (f"Selection, every method alike: gamma = g0 × {{{mults}}} with g0 the median heuristic of the training "
            f"rows (1/median ‖x−x'‖² for the Gaussian kernel, 1/median ‖x−x'‖₁ for the Laplacian), "
            f"alpha = λ × n_rows for λ in {{{lams}}} (the SVM: C in {{{cs}}}), on the first {s['sel_rows']:,} "
            "training rows. randfeat's rows choose with randfeat.RidgeCV / RidgeClassifierCV on those rows "
            "(gammas= and alphas= the grid; exact leave-one-out for Fourier features, 5-fold CG for binning; "
            "accuracy for classification); the other methods fit each point on them and score it on the first "
            f"{s['val_rows']:,} validation rows (10% of the non-test rows, held out). The best is refitted on all "
            "training rows and scored once on the test rows; selection and final fit are timed separately. "
            "Nystroem takes RBFSampler's choice, the paired Fourier row Fourier+LS's.")


def _columns(grids):
    keys = ["rf_fourier", f"rf_binning_{grids[0]}", f"rf_binning_{grids[1]}", "sk_rbf_sampler",
            "sk_nystroem", "exact", "linear"]
    heads = ["Fourier+LS", f"Binning+LS P={grids[0]}", f"Binning+LS P={grids[1]}",
             "RBFSampler+Ridge", "Nystroem+Ridge", "exact kernel", "linear"]
    return keys, heads


def _paper_row(paper_key, grids):
    """The paper's numbers under the columns of our table (a column the paper did not run: —)."""
    p = PAPER_TABLE1[paper_key]
    cells = [p["Fourier+LS"]]
    cells += [p["Binning+LS"] if g == _paper_grids(paper_key) else "—" for g in grids]
    cells += ["—", "—", f"{p['Exact SVM']}; CVM {p['CVM']}", "—"]
    return f"| ↳ paper: {PAPER_SETS[paper_key]}, 2007 machine | " + " | ".join(cells) + " |"


def paper_comparison(res, grids):
    """Our errors beside the paper's on the paper's own data, with the test error's standard error."""
    t = res["task"]
    key = t.get("paper_key")
    if key not in PAPER_TABLE1:
        return None
    by = {r["method"]: r for r in res["rows"] if "test_error" in r}
    pairs = [("Fourier+LS", "rf_fourier", "Fourier+LS")]
    pairs += [(f"Binning+LS (P={g})", f"rf_binning_{g}", "Binning+LS") for g in grids if g == _paper_grids(key)]
    pairs += [("exact kernel", "exact", "Exact SVM")]
    parts, errors = [], []
    for label, method, column in pairs:
        if method in by:
            ours, theirs = by[method]["test_error"], paper_error(key, column)
            parts.append(f"{label} {ours:.2f}% vs {theirs:g}% ({ours - theirs:+.2f})")
            errors.append(ours)
    if not parts:
        return None
    se = test_error_se(errors[0], t["n_test"], t["kind"])
    return (f"Against the paper on its own data ({t['name']}): " + ", ".join(parts) +
            f". Standard error of a test error here: ≈ {se:.2f} points ({t['n_test']:,} test rows).")


def speed_ratio(res):
    """randfeat Fourier+LS against RBFSampler+Ridge on the same rows."""
    by = {r["method"]: r for r in res["rows"]}
    base = by.get("sk_rbf_sampler", {})
    ours = by.get("rf_fourier_paired") if by.get("rf_fourier_paired", {}).get("status") == "ok" else by.get("rf_fourier")
    if not ours or "fit_seconds" not in ours or "fit_seconds" not in base:
        return None
    n_test = res["task"]["n_test"]
    se = test_error_se(base["test_error"], n_test, res["task"]["kind"])
    text = (f"randfeat Fourier+LS vs RBFSampler+Ridge on the same {base['n_train_used']:,} rows, same D: "
            f"error {ours['test_error']:.2f}% vs {base['test_error']:.2f}% (standard error ≈ {se:.2f} points "
            f"on {n_test:,} test rows), training "
            f"{base['fit_seconds'] / ours['fit_seconds']:.1f}× faster, peak memory "
            f"{fmt_bytes(ours.get('peak_mem_bytes'))} vs {fmt_bytes(base.get('peak_mem_bytes'))}.")
    floor = res.get("gram_floor_seconds")
    if floor:
        text += (f" Both must form the N·D² Gram matrix: a bare float64 syrk of it takes {fmt_seconds(floor)} here "
                 f"(RBFSampler+Ridge: {base['fit_seconds'] / floor:.1f}× that, randfeat: "
                 f"{ours['fit_seconds'] / floor:.1f}×), so no float64 method can train more than "
                 f"{base['fit_seconds'] / floor:.1f}× faster than RBFSampler+Ridge here.")
    return text


def render_markdown(results, meta):
    """The whole report: the table in the paper's layout, the paper's table, then one section per set."""
    grids = meta["grids"]
    lines = [f"# Table 1, measured ({meta['profile']} run)", ""]
    lines.append(f"Generated by `python bench/table1.py {meta['argv']}` on {meta['date']}; "
                 f"{meta['machine'].get('cpu_count')} cores, threads: {meta['threads']}, load average {meta['machine'].get('load_average_1min')} "
                 "at the start (a shared machine: timings are noisy; compare rows of one run).")
    lines.append("Cells: test error (classification: % wrong; regression: RMSE / std(y) in %), "
                 "training wall time, peak memory added during training.")
    selection = selection_text(meta)
    if selection:
        lines += ["", selection]
    lines.append("")
    # Paper layout: one row per data set; real data get the paper's row beneath.
    keys, heads = _columns(grids)
    lines.append("| data set | " + " | ".join(heads) + " |")
    lines.append("|---" * (len(heads) + 1) + "|")
    for res in results:
        t = res["task"]
        by = {r["method"]: r for r in res["rows"]}
        name = f"{t['name']} ({t['kind']}, {t['n_train']:,} train × {t['n_features']}, D={t['D']})"
        lines.append(f"| {name} | " + " | ".join(_cell(by[k]) if k in by else "—" for k in keys) + " |")
        if t.get("paper_key") in PAPER_TABLE1:
            lines.append(_paper_row(t["paper_key"], grids))
    lines.append("")
    for res in results:
        comparison = paper_comparison(res, grids)
        if comparison:
            lines += [comparison, ""]
    # The paper's own numbers.
    lines.append("Rahimi & Recht (2007), Table 1, for reference:")
    lines.append("")
    lines.append("| data set | Fourier+LS | Binning+LS | CVM | Exact SVM |")
    lines.append("|---|---|---|---|---|")
    for key, label in PAPER_SETS.items():
        p = PAPER_TABLE1[key]
        lines.append(f"| {label} | {p['Fourier+LS']} | {p['Binning+LS']} | {p['CVM']} | {p['Exact SVM']} |")
    lines.append("")
    lines.append(PAPER_NOTE)
    lines.append("")
    # Details per data set.
    for res in results:
        t = res["task"]
        lines.append(f"## {t['name']}")
        lines.append("")
        lines.append(f"{t['kind']}, {t['n_train']:,} training / {t['n_val']:,} validation / {t['n_test']:,} test rows, "
                     f"{t['n_features']} features ({'CSR' if t['sparse'] else 'dense'}); source: `{t['source']}`; "
                     f"median-heuristic γ: rbf {t['median_heuristic_gamma']['rbf']:.3g}, "
                     f"laplacian {t['median_heuristic_gamma']['laplacian']:.3g}.")
        lines.append("")
        lines.append(f"| method | size | {_err_label(t['kind'])} | selection time | train time | peak memory | chosen | "
                     "rows | note |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for r in res["rows"]:
            if r["status"] == "omitted":
                continue
            err = f"{r['test_error']:.2f}" if "test_error" in r else "—"
            chosen = fmt_params(r["params"]) if r.get("params") else "—"
            if r.get("params") and "lam" in r["params"] and r.get("n_train_used"):
                chosen += f" (alpha={r['params']['lam'] * r['n_train_used']:.3g})"
            lines.append(f"| {r['label']} | {r['size']} | {err} | {fmt_seconds(r.get('selection_seconds'))} | "
                         f"{fmt_seconds(r.get('fit_seconds'))} | "
                         f"{fmt_bytes(r.get('peak_mem_bytes'))} | {chosen} | {r.get('n_train_used', '—')} | "
                         f"{r['note'] if r['status'] == 'ok' else r['note'] or r['status']} |")
        ratio = speed_ratio(res)
        if ratio:
            lines.append("")
            lines.append(ratio)
        lines.append("")
    return "\n".join(lines) + "\n"


def render_console(results, grids):
    """A short summary per data set for the terminal."""
    out = []
    for res in results:
        t = res["task"]
        out.append(f"\n{t['name']}: {t['kind']}, {t['n_train']} train rows x {t['n_features']} features")
        out.append(f"  {'method':48s} {'size':>11s} {_err_label(t['kind']):>10s} {'select':>9s} {'train':>9s} "
                   f"{'peak mem':>9s}  chosen / note")
        for r in res["rows"]:
            if r["status"] == "omitted":
                continue
            if "test_error" in r:
                out.append(f"  {r['label']:48s} {r['size']:>11s} {r['test_error']:10.2f} "
                           f"{fmt_seconds(r.get('selection_seconds')):>9s} {fmt_seconds(r['fit_seconds']):>9s} "
                           f"{fmt_bytes(r.get('peak_mem_bytes')):>9s}  {fmt_params(r['params'])} {r['note']}")
            else:
                out.append(f"  {r['label']:48s} {r['size']:>11s} {'—':>10s} {'—':>9s} {'—':>9s} {'—':>9s}  "
                           f"{r['note'] or r['status']}")
        for extra in (paper_comparison(res, grids), speed_ratio(res)):
            if extra:
                out.append("  " + extra)
    return "\n".join(out)
