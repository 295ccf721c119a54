#!/usr/bin/env python
"""Rahimi & Recht (2007), Table 1, measured here: random features + least
squares against scikit-learn's kernel approximations, an exact kernel machine
and a linear model, on the same splits with the same hyper-parameter budget.

Usage
-----
    python bench/table1.py              # Adult (UCI) + Census-, Adult-, Forest-like sets, full size (< 30 min)
    python bench/table1.py --quick      # the real Adult set whole, the look-alikes subsampled: < 3 min
    python bench/table1.py --tiny       # seconds (the test suite runs this)
    python bench/table1.py --dataset adult                  # the real Adult set alone (shipped with randfeat)
    python bench/table1.py --data covtype.libsvm.binary     # svmlight/libsvm, .npz or .csv files
    python bench/table1.py --data a9a --test-data a9a.t
    python bench/table1.py --dataset covtype                # fetched by scikit-learn (needs network)
    python bench/table1.py --quick --refresh-committed      # rewrite the committed bench/results/table1_quick.*

Results
-------
Written to ``bench/out/`` (git-ignored), or to ``--out DIR``: a run never
touches the tracked files.  ``--refresh-committed`` writes to
``bench/results/`` instead, the committed results the documentation's
Performance page shows (for a maintainer refreshing them on a quiet machine).

Data
----
* Adult (UCI): the real data of the paper's Adult row, shipped with randfeat
  (``randfeat.datasets.load_adult``, CC BY 4.0, Becker & Kohavi 1996), in
  the paper's a9a encoding on the standard split: 32,561 training rows
  (10% of them held out for validation) and 16,281 test rows, whole even
  with ``--quick``.  Its paper row is printed beneath it.
* Census-, Adult- and Forest-like: synthetic look-alikes of the paper's
  sets (``randfeat.datasets``), already in [0, 1].  Other data are scaled by
  MaxAbsScaler fitted on the training rows.

Protocol (every method alike)
-----------------------------
* Fixed seeded split: test 20% (or the given test file), validation 10% of
  the rest, the remainder is the training set.
* Hyper-parameters are chosen on the validation split by fitting on the
  first ``sel_rows`` training rows: ``gamma = g0 × {multipliers}`` where
  ``g0`` is the median heuristic (1/median ‖x−x'‖² for the Gaussian kernel,
  1/median ‖x−x'‖₁ for the Laplacian), and ``alpha = λ × n_rows`` for
  ``λ`` in a small grid (C in {1, 10, 100} for the SVM).  The chosen values are
  reported.  Two rows reuse another row's choice for the same model: the
  paired Fourier row, and Nystroem (which takes RBFSampler's gamma and alpha).
* The chosen model is then fitted on the whole training set (timed: wall
  clock; peak memory: increase of the process RSS during the fit) and scored
  on the test split: % misclassified, or for regression the normalised RMSE
  (RMSE / standard deviation of the test targets, in %).
* Threads (``--threads``): randfeat's ``n_jobs`` and the BLAS pool of the
  scikit-learn baselines get the same count: all cores for the full run, one
  for ``--quick``/``--tiny`` (steady timings on a shared machine; pass
  ``--threads -1`` for all cores).
* Memory caps (``--mem-budget-gb``): a method that materialises the N × D
  feature matrix in float64 (scikit-learn's RBFSampler/Nystroem pipelines)
  is trained on the first rows that fit the budget, and the table says so;
  randfeat's Ridge streams Fourier features and never forms that matrix.
  The exact kernel machine is skipped when its estimated fit time (timed on
  two subsamples, extrapolated) exceeds ``--exact-budget-s`` or its kernel
  matrix exceeds the memory budget; the table gives the estimate.

The parts: ``_profiles`` (run sizes), ``_tasks`` (data and splits),
``_methods`` (the rows), ``_selection`` (grid and validation),
``_protocol`` (selection, caps and timed fits of one set), ``_report``
(Markdown and console, the paper's numbers); this file is the command line.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (  # noqa: E402
    COMMITTED_RESULTS,
    LOCAL_RESULTS,
    HarnessError,
    fmt_seconds,
    machine_info,
    progress,
    results_dir,
    write_json,
)
from _methods import build_methods  # noqa: E402
from _profiles import PROFILES  # noqa: E402
from _protocol import run_task  # noqa: E402
from _report import PAPER_TABLE1, render_console, render_markdown  # noqa: E402
from _tasks import BUILTIN_SETS, builtin_tasks, fetched_task, file_task  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="subsample so the whole table takes < 3 minutes")
    size.add_argument("--tiny", action="store_true", help="tiny sizes, seconds (tests)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="FILE", help="svmlight/libsvm, .npz (X, y[, X_test, y_test]) or .csv file")
    src.add_argument("--dataset", choices=["adult", "covtype", "california", "cadata"],
                     help="a public data set: adult is the copy shipped with randfeat; the others are fetched "
                          "through scikit-learn (needs network)")
    p.add_argument("--test-data", metavar="FILE", help="test split for --data (else a seeded 20%% split)")
    p.add_argument("--task", choices=["auto", "classification", "regression"], default="auto")
    p.add_argument("--target-column", type=int, default=-1, help="CSV column holding y (default: last)")
    p.add_argument("--no-scale", action="store_true", help="do not MaxAbs-scale --data/--dataset features")
    p.add_argument("--max-rows", type=int,
                   help="use at most this many rows of --data/--dataset (adult: of each of its two files)")
    p.add_argument("--sets", default=",".join(BUILTIN_SETS), help="built-in sets to run (comma list of "
                   f"{', '.join(BUILTIN_SETS)})")
    p.add_argument("--methods", help="comma list of method keys (default: all); see --list-methods")
    p.add_argument("--list-methods", action="store_true")
    p.add_argument("--render", metavar="JSON", help="only rewrite the Markdown table from a results JSON file")
    p.add_argument("-D", "--D", type=int, help="Fourier / Nystroem dimension (default: the paper's)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for every method: randfeat n_jobs and the BLAS pool; -1 = all cores "
                        "(default: all cores for the full run, 1 for --quick/--tiny)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=1, help="timed fits per method (median reported), alternating")
    p.add_argument("--mem-budget-gb", type=float, default=6.0,
                   help="memory a baseline may use for its feature or kernel matrix (default 6)")
    p.add_argument("--exact-budget-s", type=float, help="skip the exact kernel machine above this estimated fit time")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", help="results directory (default bench/out, which git ignores)")
    where.add_argument("--refresh-committed", action="store_true",
                       help="write to bench/results, the committed results shown in the docs (maintainers)")
    p.add_argument("--tag", help="file name stem for the outputs (default table1_<profile>)")
    args = p.parse_args(argv)
    if args.test_data and not args.data:
        p.error("--test-data needs --data")
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    if args.threads is not None and args.threads == 0 or (args.threads or 0) < -1:
        p.error("--threads must be a positive count or -1 (all cores)")
    return args


def render_only(path):
    """--render: rewrite the Markdown beside a results JSON file."""
    path = Path(path)
    if not path.exists():
        raise HarnessError(f"--render {path}: no such file")
    data = json.loads(path.read_text())
    path.with_suffix(".md").write_text(render_markdown(data["results"], data["meta"]))
    print(f"wrote {path.with_suffix('.md')}")


def chosen_methods(methods, wanted):
    """The methods named in --methods (all when None), with a clear error for unknown keys."""
    if not wanted:
        return methods
    keys = [k.strip() for k in wanted.split(",") if k.strip()]
    unknown = sorted(set(keys) - {m.key for m in methods})
    if unknown:
        raise HarnessError(f"--methods: unknown {unknown}; known: {[m.key for m in methods]}")
    return [m for m in methods if m.key in keys]


def tasks_of(args, profile):
    """The tasks the command line asks for (a generator: each set is built when its turn comes)."""
    if args.data:
        return [file_task(args.data, args.test_data, profile, target_column=args.target_column, kind=args.task,
                          D=args.D, max_rows=args.max_rows, seed=args.seed, scale=not args.no_scale)]
    if args.dataset:
        return [fetched_task(args.dataset, profile, D=args.D, max_rows=args.max_rows, seed=args.seed,
                             scale=not args.no_scale)]
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    bad = sorted(set(names) - set(BUILTIN_SETS))
    if bad:
        raise HarnessError(f"--sets: unknown {bad}; choose from {', '.join(BUILTIN_SETS)}")
    return builtin_tasks(profile, names, args.seed)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    profile_name = "tiny" if args.tiny else "quick" if args.quick else "full"
    profile = dict(PROFILES[profile_name])
    if args.exact_budget_s is not None:
        profile["exact_budget_s"] = args.exact_budget_s
    if args.render:
        render_only(args.render)
        return 0
    threads = profile["threads"] if args.threads is None else args.threads
    threads = None if threads is not None and threads < 0 else threads
    methods = build_methods(profile, n_jobs=threads)
    if args.list_methods:
        for m in methods:
            print(f"{m.key:22s} {m.label}")
        return 0
    methods = chosen_methods(methods, args.methods)
    meta = {"profile": profile_name, "argv": " ".join(sys.argv[1:] if argv is None else argv),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine_info(), "grids": profile["grids"],
            "settings": {k: v for k, v in profile.items() if k != "sizes"}, "sizes": profile["sizes"],
            "mem_budget_gb": args.mem_budget_gb, "repeats": args.repeats, "seed": args.seed}
    t0 = time.perf_counter()
    tasks = tasks_of(args, profile)
    results = []
    from threadpoolctl import threadpool_limits

    limiter = threadpool_limits(limits=threads)  # None: no limit
    meta["threads"] = threads or "all"
    if threads is None and os.getloadavg()[0] > (os.cpu_count() or 1):
        progress(f"warning: load average {os.getloadavg()[0]:.1f} exceeds {os.cpu_count()} cores; multi-threaded "
                 "timings will be inflated and noisy (--threads 1 is steadier on a shared machine)")
    out = results_dir(args.out or (COMMITTED_RESULTS if args.refresh_committed else LOCAL_RESULTS))
    stem = args.tag or f"table1_{profile_name}"

    def write_outputs():  # after every data set, so a long run leaves its finished sets behind
        meta["total_seconds"] = time.perf_counter() - t0
        (out / f"{stem}.md").write_text(render_markdown(results, meta))
        write_json(out / f"{stem}.json", {"meta": meta, "results": results, "paper_table1": PAPER_TABLE1})

    for task in tasks:
        progress(f"{task.name}: {task.n_train} training rows, {task.X_train.shape[1]} features, D={task.D}")
        results.append(run_task(task, methods, profile, seed=args.seed, repeats=args.repeats,
                                mem_budget_gb=args.mem_budget_gb))
        write_outputs()
    limiter.unregister()
    write_outputs()
    print(render_console(results, profile["grids"]))
    print(f"\ntotal {fmt_seconds(meta['total_seconds'])}; wrote {out / (stem + '.md')} and {out / (stem + '.json')}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as exc:
        print(f"table1.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
