"""Is randfeat's Fourier+LS error "within noise" of RBFSampler+Ridge? Measure the noise.

Table 1 (bench/table1.py) fits each method once, with one draw of random
features, and quotes the test set's binomial / RMSE standard error.  That
ignores the other source of noise: which random features were drawn.  This
script refits both pipelines with K feature draws (random_state = 0..K−1) at
the hyper-parameters a Table 1 run chose (read from its JSON), on the same
training rows, and reports per set the mean and standard deviation of the
test error over draws and the difference of the two means with its
standard error, sqrt(s₁²/K + s₂²/K).

Usage::

    python bench/feature_draws.py                       # full sizes, from bench/results/table1_full.json
    python bench/feature_draws.py --quick               # quick sizes, from table1_quick.json
    python bench/feature_draws.py --tiny --from F.json  # smoke test

Results: bench/results/feature_draws_<profile>.md and .csv (``--out DIR``).
"""

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _harness import progress  # noqa: E402
from _methods import build_methods  # noqa: E402
from _profiles import PROFILES  # noqa: E402
from _selection import predict_chunked, score  # noqa: E402
from _tasks import BUILTIN_SETS, builtin_tasks  # noqa: E402


def refit_errors(task, method, params, n_rows, draws):
    """Test errors of ``method`` refitted with feature seeds 0..draws−1."""
    errors = []
    for seed in range(draws):
        est = method.make(task, params, n_rows, seed)
        est.fit(task.X_train[:n_rows], task.y_train[:n_rows])
        errors.append(score(task, task.y_test, predict_chunked(est, task.X_test)))
    return np.asarray(errors)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--tiny", action="store_true")
    p.add_argument("--from", dest="source", help="Table 1 results JSON with the chosen hyper-parameters")
    p.add_argument("--draws", type=int, default=None, help="feature draws per method (default 10; 3 with --tiny)")
    p.add_argument("--sets", default=",".join(BUILTIN_SETS))
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)

    profile_name = "tiny" if args.tiny else "quick" if args.quick else "full"
    profile = dict(PROFILES[profile_name])
    draws = args.draws or (3 if args.tiny else 10)
    source = Path(args.source) if args.source else HERE / "results" / f"table1_{profile_name}.json"
    if not source.exists():
        p.error(f"{source} not found: run bench/table1.py{' --' + profile_name if profile_name != 'full' else ''} first")
    results = json.loads(source.read_text())["results"]
    chosen = {r["task"]["key"]: {row["method"]: row for row in r["rows"]} for r in results}
    methods = {m.key: m for m in build_methods(profile)}

    rows = []
    t0 = time.perf_counter()
    for task in builtin_tasks(profile, [s for s in args.sets.split(",") if s in chosen], 0):
        by = chosen[task.key]
        base = by.get("sk_rbf_sampler", {})
        ours = by.get("rf_fourier", {})
        if "params" not in base or "params" not in ours:
            continue
        # The rows RBFSampler+Ridge could be trained on (all, or its memory cap).
        n_rows = base.get("n_train_used") or task.n_train
        errs = {}
        for key, rec in (("rf_fourier", ours), ("sk_rbf_sampler", base)):
            progress(f"{task.name}: {rec['label']}: {draws} feature draws on {n_rows:,} rows")
            errs[key] = refit_errors(task, methods[key], rec["params"], n_rows, draws)
        a, b = errs["rf_fourier"], errs["sk_rbf_sampler"]
        se = math.sqrt(a.var(ddof=1) / draws + b.var(ddof=1) / draws)
        rows.append(dict(set=task.name, rows=n_rows, D=task.D, draws=draws,
                         randfeat_mean=a.mean(), randfeat_sd=a.std(ddof=1),
                         sklearn_mean=b.mean(), sklearn_sd=b.std(ddof=1),
                         difference=a.mean() - b.mean(), difference_se=se))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"feature_draws_{profile_name}"
    with open(out / f"{stem}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["set"])
        w.writeheader()
        w.writerows(rows)
    lines = [
        "# Fourier+LS vs RBFSampler+Ridge over feature draws (bench/feature_draws.py)",
        "",
        f"Hyper-parameters from `{source.name}`; each pipeline refitted with random_state = 0..{draws - 1} "
        f"on the same training rows; {time.perf_counter() - t0:.0f} s in all.",
        "",
        "| data set | rows | D | randfeat Fourier+LS error (%) | RBFSampler+Ridge error (%) | difference | difference / its SE |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        z = r["difference"] / r["difference_se"] if r["difference_se"] > 0 else float("nan")
        lines.append(f"| {r['set']} | {r['rows']:,} | {r['D']} | {r['randfeat_mean']:.2f} ± {r['randfeat_sd']:.2f} | "
                     f"{r['sklearn_mean']:.2f} ± {r['sklearn_sd']:.2f} | {r['difference']:+.2f} ± "
                     f"{r['difference_se']:.2f} | {z:+.1f} |")
    lines.append("")
    lines.append("± after a mean: standard deviation over draws; after the difference: its standard error.")
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
