"""Scale-out benchmark: Ridge(features=RandomFourierFeatures) on rows held by Dask workers vs in memory.

Fits ``Ridge(features=RandomFourierFeatures(D))`` on N x 54 float32 rows
(made on the workers by ``dask.array.random`` and persisted there), on a
``distributed.LocalCluster`` with 1 and 2 worker processes (one thread
each), and the in-memory streaming fit of the same rows, alternating the
runs.  Reports per configuration: wall time, total CPU time (client plus
every worker process), peak RSS (ru_maxrss) of the client (it includes
the in-memory baseline's copy of X) and each worker's peak RSS during the fit
(VmHWM, reset before the fit: a forked worker inherits the client's ru_maxrss), the
per-block statistics time (measured on one block in this process), and the
coefficients' largest relative difference from the in-memory fit.

Then Binning+LS by CG (``Ridge(features=RandomBinningFeatures(30))``, one
target, features made and kept on the workers, the CG iteration on a
worker): seconds per CG iteration, in memory (all cores) and on a
LocalCluster (one thread per worker process), each by the solver's own
clock between its 10th and last iteration (``verbose`` logs it; no set-up
inside); the two alternate, in turn first, several times, and the table
gives medians and the median of the same-run ratios (issue 27's bar: at
most 1.5 on two workers).

Usage (a single command; ``--quick`` takes well under a minute)::

    python bench/scale_out.py --quick            # N=200,000, D=500
    python bench/scale_out.py                    # N=2,000,000, D=1000 (issue 13's size)
    python bench/scale_out.py --quick --out bench/results/scale_out_quick.json
    python bench/scale_out.py --rows 0 --workers 2 --binning-rows 400000 --repeats 7   # the CG tables only
    python bench/scale_out.py --rows 0 --workers 2 --no-iteration-table --repeats 5 \
        --out bench/results/scale_out_whole.json --md bench/results/scale_out_whole.md   # the whole-call table only

Then the whole ``fit`` call of the same Binning+LS by CG (40 iterations,
``tol=0``) in memory against the LocalCluster, alternating (issue 36's bar:
at most 1.5x on two workers); ``--quick`` runs it on 100,000 rows.

Total CPU time is the bar of issue 13 (at most 1.3x the in-memory fit's);
wall time on a shared 2-core machine mostly says how loaded it was.
"""

import argparse
import json
import os
import resource
import sys
import time

import numpy as np


def _cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _reset_peak_rss():
    """Reset this process's peak RSS (Linux: VmHWM); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _worker_peak_mb():
    # A worker forked from this process inherits its ru_maxrss, so workers
    # read VmHWM, reset before the fit (``_reset_peak_rss``); elsewhere the
    # current RSS after the fit.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _estimator(D, n_jobs):
    from randfeat import RandomFourierFeatures, Ridge

    return Ridge(alpha=1.0, features=RandomFourierFeatures(D, gamma=0.05, random_state=0, n_jobs=n_jobs),
                 n_jobs=n_jobs)


def _data(client, N, chunk_rows):
    import dask.array as da

    rs = da.random.default_rng(0)
    X = rs.standard_normal((N, 54), chunks=(chunk_rows, 54), dtype=np.float32)
    y = (da.sin(X[:, 0]) + X[:, 1] * X[:, 2]).astype(np.float64)
    return client.persist(X), client.persist(y)


def run_cluster(n_workers, N, D, chunk_rows, reference):
    """Fit on a fresh LocalCluster with n_workers processes; return the measurements."""
    import distributed

    with distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        X, y = _data(client, N, chunk_rows)
        distributed.wait([X, y])
        worker_cpu0 = client.run(_cpu_seconds)
        client.run(_reset_peak_rss)
        cpu0, t0 = _cpu_seconds(), time.perf_counter()
        est = _estimator(D, n_jobs=1).fit(X, y)
        wall = time.perf_counter() - t0
        client_cpu = _cpu_seconds() - cpu0
        worker_cpu = sum(v - worker_cpu0[k] for k, v in client.run(_cpu_seconds).items())
        worker_rss = list(client.run(_worker_peak_mb).values())
    coef = np.asarray(est.coef_, dtype=np.float64)
    rel = float(np.abs(coef - reference).max() / np.abs(reference).max()) if reference is not None else None
    return {"config": f"LocalCluster {n_workers} worker(s)", "wall_s": wall, "cpu_s": client_cpu + worker_cpu,
            "client_cpu_s": client_cpu, "client_peak_rss_mb": _peak_rss_mb(),
            "worker_peak_rss_mb": [round(m) for m in worker_rss], "coef_rel_diff": rel}


def run_in_memory(X, y, D):
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    est = _estimator(D, n_jobs=None).fit(X, y)
    return est, {"config": "in-memory streaming fit", "wall_s": time.perf_counter() - t0,
                 "cpu_s": _cpu_seconds() - cpu0, "client_peak_rss_mb": _peak_rss_mb()}


def block_cost(X, y, D, chunk_rows):
    """Seconds for one block's statistics, the merge of two, and the client's solve (the cost model's terms)."""
    from randfeat._solvers import pipeline
    from randfeat._solvers.stats import RidgeStatistics

    features = _estimator(D, n_jobs=1).features.fit(X[:chunk_rows])
    t0 = time.perf_counter()
    s = pipeline.block_statistics(features, X[:chunk_rows], y[:chunk_rows, None], None, True, 1)
    t_block = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = s.merge(s)
    t_merge = time.perf_counter() - t0
    t0 = time.perf_counter()
    RidgeStatistics.solve(m, 1.0)
    return {"block_s": t_block, "merge_s": t_merge, "solve_s": time.perf_counter() - t0}


def _binning_ridge(max_iter, n_jobs, grids):
    from randfeat import RandomBinningFeatures, Ridge

    # tol=0: every fit runs max_iter iterations; verbose: the solver logs its own clock every 10.
    return Ridge(alpha=1.0, solver="cg", tol=0.0, max_iter=max_iter, n_jobs=n_jobs, verbose=True,
                 features=RandomBinningFeatures(grids, gamma=0.05, random_state=0, n_jobs=n_jobs))


def _per_iteration(fit, max_iter):
    """Seconds per CG iteration, from the solver's own clock (its log, every 10 iterations): no set-up inside.

    On Dask the log comes from the worker that runs the iteration, so it
    times the iteration there, whatever the relay to the client costs.
    """
    import contextlib
    import io
    import re
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    err = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(err):
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        fit(max_iter)
        wall = time.perf_counter() - t0
    clock = {int(m.group(1)): float(m.group(2))
             for m in re.finditer(r"CG iteration (\d+): .*elapsed ([0-9.]+) s", err.getvalue())}
    first, last = 10, max(clock)
    return (clock[last] - clock[first]) / (last - first), wall


def binning_cg_iteration(N, grids, chunk_rows, workers, repeats, max_iter=210):
    """Binning+LS time per CG iteration: in memory vs a LocalCluster, alternating; medians and same-run ratios."""
    import dask
    import dask.array as da
    import distributed

    with dask.config.set(scheduler="synchronous"):
        Xd = da.random.default_rng(1).standard_normal((N, 54), chunks=(chunk_rows, 54), dtype=np.float32)
        X = Xd.compute()
    y = (np.sin(X[:, 0]) + X[:, 1] * X[:, 2]).astype(np.float64)
    rows = []
    for w in workers:
        with distributed.LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            # The same rows, made by the same generator on the workers.
            Xc = da.random.default_rng(1).standard_normal((N, 54), chunks=(chunk_rows, 54), dtype=np.float32)
            yc = client.persist((da.sin(Xc[:, 0]) + Xc[:, 1] * Xc[:, 2]).astype(np.float64))
            Xc = client.persist(Xc)
            distributed.wait([Xc, yc])
            fits = {"in-memory": lambda m: _binning_ridge(m, None, grids).fit(X, y),
                    "cluster": lambda m: _binning_ridge(m, 1, grids).fit(Xc, yc)}
            for fit in fits.values():  # warm-up (imports, pools, the workers' first fits), not reported
                _per_iteration(fit, 20)
            runs = {name: [] for name in fits}
            for r in range(repeats):
                for name in (("in-memory", "cluster") if r % 2 == 0 else ("cluster", "in-memory")):
                    runs[name].append(_per_iteration(fits[name], max_iter))
        mem, dsk = (np.array([t for t, _ in runs[k]]) for k in ("in-memory", "cluster"))
        rows.append({"workers": w, "rows": N, "grids": grids, "chunk_rows": chunk_rows, "max_iter": max_iter,
                     "in_memory_s": float(np.median(mem)), "cluster_s": float(np.median(dsk)),
                     "ratio_median": float(np.median(dsk / mem)), "ratios": (dsk / mem).round(3).tolist(),
                     "fit_wall_s": {k: float(np.median([f for _, f in v])) for k, v in runs.items()}})
    print(f"Binning+LS by CG, N={N:,} x 54 float32, {grids} grids, one target, blocks of {chunk_rows:,} rows; "
          f"iterations 10..{max_iter} by the solver's clock; {repeats} alternating runs, medians (machine possibly shared)")
    print(f"{'LocalCluster':14s} {'in memory s/it':>15s} {'cluster s/it':>13s} {'ratio (same run)':>17s}  ratios")
    for r in rows:
        print(f"{r['workers']:2d} worker(s)   {r['in_memory_s']:15.4f} {r['cluster_s']:13.4f} "
              f"{r['ratio_median']:17.2f}  {r['ratios']}")
    return rows


def _machine():
    """The CPU model, AVX-512 or not, and the load averages now (the machine may be shared)."""
    model, avx512 = "unknown", False
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")),
                     model)
        avx512 = " avx512f" in text
    except OSError:
        pass
    return {"cpu": model, "avx512": avx512, "cores": os.cpu_count(), "load_average": list(os.getloadavg())}


def binning_whole_call(N, grids, chunk_rows, workers, repeats, max_iter=40):
    """Binning+LS by CG, the whole ``fit`` call: in memory (all cores) vs a LocalCluster, alternating.

    Both fits run exactly ``max_iter`` iterations (``tol=0``); the cluster's
    wall time includes everything a user waits for: the summary pass, the
    vocabulary on the workers and its merge, the features made and placed
    on the workers, the preconditioner and the iterations.  Reports medians
    and the median of the same-run ratios, the load averages before and
    after, and the coefficients' largest relative difference.
    """
    import warnings

    import dask
    import dask.array as da
    import distributed
    from sklearn.exceptions import ConvergenceWarning

    with dask.config.set(scheduler="synchronous"):
        X = da.random.default_rng(1).standard_normal((N, 54), chunks=(chunk_rows, 54), dtype=np.float32).compute()
    y = (np.sin(X[:, 0]) + X[:, 1] * X[:, 2]).astype(np.float64)
    rows = []
    for w in workers:
        with distributed.LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            Xc = da.random.default_rng(1).standard_normal((N, 54), chunks=(chunk_rows, 54), dtype=np.float32)
            yc = client.persist((da.sin(Xc[:, 0]) + Xc[:, 1] * Xc[:, 2]).astype(np.float64))
            Xc = client.persist(Xc)
            distributed.wait([Xc, yc])

            def fit(name):
                est = _binning_ridge(max_iter, None if name == "in-memory" else 1, grids)
                est.set_params(verbose=False)
                cluster_cpu0 = client.run(_cpu_seconds) if name == "cluster" else {}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    cpu0, t0 = _cpu_seconds(), time.perf_counter()
                    est.fit(*((X, y) if name == "in-memory" else (Xc, yc)))
                    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
                # This process's CPU includes the LocalCluster's scheduler (it runs here).
                cpu += sum(v - cluster_cpu0[k] for k, v in client.run(_cpu_seconds).items()) if cluster_cpu0 else 0.0
                return wall, cpu, est

            for name in ("in-memory", "cluster"):  # warm-up (imports, pools, the workers' first fits)
                fit(name)
            load_before = os.getloadavg()
            runs, cpus, coefs = {"in-memory": [], "cluster": []}, {"in-memory": [], "cluster": []}, {}
            for r in range(repeats):
                for name in (("in-memory", "cluster") if r % 2 == 0 else ("cluster", "in-memory")):
                    t, cpu, est = fit(name)
                    runs[name].append(t)
                    cpus[name].append(cpu)
                    coefs[name] = np.asarray(est.coef_, dtype=np.float64)
                    assert int(np.max(est.n_iter_)) == max_iter, est.n_iter_
            load_after = os.getloadavg()
        mem, dsk = np.array(runs["in-memory"]), np.array(runs["cluster"])
        rel = float(np.abs(coefs["cluster"] - coefs["in-memory"]).max() / np.abs(coefs["in-memory"]).max())
        rows.append({"workers": w, "rows": N, "grids": grids, "chunk_rows": chunk_rows, "iterations": max_iter,
                     "in_memory_s": float(np.median(mem)), "cluster_s": float(np.median(dsk)),
                     "ratio_median": float(np.median(dsk / mem)), "ratios": (dsk / mem).round(3).tolist(),
                     "in_memory_runs_s": mem.round(3).tolist(), "cluster_runs_s": dsk.round(3).tolist(),
                     "in_memory_cpu_s": float(np.median(cpus["in-memory"])), "cluster_cpu_s": float(np.median(cpus["cluster"])),
                     "cpu_ratio_median": float(np.median(np.array(cpus["cluster"]) / np.array(cpus["in-memory"]))),
                     "coef_rel_diff": rel, "load_before": list(load_before), "load_after": list(load_after)})
    print(f"Binning+LS by CG, the whole fit call: N={N:,} x 54 float32, {grids} grids, {max_iter} iterations, "
          f"blocks of {chunk_rows:,} rows; {repeats} alternating runs, medians (machine possibly shared)")
    print(f"{'LocalCluster':14s} {'in memory s':>12s} {'cluster s':>10s} {'ratio (same run)':>17s} {'CPU ratio':>10s}  "
          f"load before/after  coef rel  ratios")
    for r in rows:
        print(f"{r['workers']:2d} worker(s)   {r['in_memory_s']:12.2f} {r['cluster_s']:10.2f} {r['ratio_median']:17.2f} "
              f"{r['cpu_ratio_median']:10.2f}  {r['load_before'][0]:.1f}/{r['load_after'][0]:.1f}  "
              f"{r['coef_rel_diff']:.1e}  {r['ratios']}")
    return rows


def whole_call_markdown(rows, machine):
    """The whole-call table as Markdown (``--md``; the Performance page includes it)."""
    first = rows[0]
    lines = [
        f"Binning+LS by CG, the whole `fit` call (`Ridge(solver='cg', tol=0, max_iter={first['iterations']})`, "
        f"{first['rows']:,} × 54 float32 rows in blocks of {first['chunk_rows']:,}, {first['grids']} grids): "
        f"in memory on all cores against a LocalCluster of one-thread worker processes, everything the user waits "
        f"for included (summary pass, block vocabularies and their merge, features made and placed on the workers, "
        f"preconditioner, {first['iterations']} iterations); {len(first['ratios'])} alternating runs, medians and "
        f"the median of the same-run ratios. CPU: all processes (client and scheduler, workers). "
        f"{machine['cpu']}, {machine['cores']} cores{', AVX-512' if machine['avx512'] else ''}; "
        f"the machine was shared (load averages below), so only the ratios mean anything.",
        "",
        "| LocalCluster | in memory (s) | cluster (s) | cluster / in memory (same run) | CPU ratio | load (1 min) "
        "before / after | coefficients vs in-memory (rel.) | runs |",
        "|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        lines.append(f"| {r['workers']} workers | {r['in_memory_s']:.2f} | {r['cluster_s']:.2f} | {r['ratio_median']:.2f} | "
                     f"{r['cpu_ratio_median']:.2f} | {r['load_before'][0]:.1f} / {r['load_after'][0]:.1f} | "
                     f"{r['coef_rel_diff']:.1e} | {', '.join(f'{x:.2f}' for x in r['ratios'])} |")
    return "\n".join(lines) + "\n"


def fourier_table(N, D, chunk_rows, workers):
    """The Fourier ridge fit on the LocalClusters against the in-memory fit (the first table)."""
    import dask

    # The in-memory baseline fits the same rows, made by the same generator.
    with dask.config.set(scheduler="synchronous"):
        import dask.array as da

        rs = da.random.default_rng(0)
        Xd = rs.standard_normal((N, 54), chunks=(chunk_rows, 54), dtype=np.float32)
        X = Xd.compute()
        y = (np.sin(X[:, 0]) + X[:, 1] * X[:, 2]).astype(np.float64)
    rows = []
    run_in_memory(X[:chunk_rows], y[:chunk_rows], D)  # warm-up (imports, thread pools), not reported
    ref_est, first = run_in_memory(X, y, D)
    reference = np.asarray(ref_est.coef_, dtype=np.float64)
    rows.append(first)
    for w in workers:  # alternate: cluster, in-memory, cluster, in-memory
        rows.append(run_cluster(w, N, D, chunk_rows, reference))
        rows.append(run_in_memory(X, y, D)[1])
    cost = block_cost(X, y, D, chunk_rows)
    base_cpu = np.median([r["cpu_s"] for r in rows if r["config"].startswith("in-memory")])
    print(f"N={N:,} x 54 float32, D={D}, blocks of {chunk_rows:,} rows; machine: {os.cpu_count()} cores "
          f"(possibly shared)")
    print(f"{'config':32s} {'wall s':>8s} {'CPU s':>8s} {'CPU/in-mem':>10s} {'client MB':>10s} worker peak MB coef rel")
    for r in rows:
        print(f"{r['config']:32s} {r['wall_s']:8.2f} {r['cpu_s']:8.2f} {r['cpu_s'] / base_cpu:10.2f} "
              f"{r['client_peak_rss_mb']:10.0f} {str(r.get('worker_peak_rss_mb', '')):12s} "
              f"{'' if r.get('coef_rel_diff') is None else format(r['coef_rel_diff'], '.1e')}")
    n_blocks = -(-N // chunk_rows)
    print(f"cost model (one process, measured): block statistics {cost['block_s']:.3f} s, merge "
          f"{cost['merge_s'] * 1e3:.1f} ms, solve {cost['solve_s']:.3f} s")
    for W, n_rows in ((16, 100_000_000), (64, 100_000_000)):
        blocks = -(-n_rows // chunk_rows)
        t = (-(-blocks // W)) * cost["block_s"] + np.ceil(np.log2(blocks)) * cost["merge_s"] + cost["solve_s"]
        print(f"PROJECTION (not measured): {W} workers, {n_rows:,} rows in {blocks} blocks: "
              f"~{t:.0f} s wall, ignoring network and scheduler overhead")
    return {"n_blocks": n_blocks, "rows": rows, "cost": cost}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=200,000 rows, D=500 (under a minute)")
    parser.add_argument("--rows", type=int, help="rows (default 2,000,000; --quick 200,000; 0 skips the table)")
    parser.add_argument("--features", type=int, help="D (default 1000; --quick 500)")
    parser.add_argument("--workers", default="1,2", help="worker counts to run, comma-separated")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--binning-rows", type=int,
                        help="rows of the Binning+LS CG-iteration table (default 400,000; --quick 100,000; 0 skips)")
    parser.add_argument("--grids", type=int, default=30, help="binning grids of the CG-iteration table")
    parser.add_argument("--repeats", type=int, default=5, help="alternating runs of the CG-iteration table")
    parser.add_argument("--whole-rows", type=int,
                        help="rows of the Binning+LS whole-call table (default 400,000; --quick 100,000; 0 skips)")
    parser.add_argument("--md", help="write the whole-call table as Markdown here")
    parser.add_argument("--iteration-table", action=argparse.BooleanOptionalAction, default=True,
                        help="run the Binning+LS per-iteration table (--no-iteration-table skips it)")
    args = parser.parse_args(argv)
    N = args.rows or (200_000 if args.quick else 2_000_000)
    D = args.features or (500 if args.quick else 1000)
    chunk_rows = 50_000 if args.quick else 250_000
    workers = [int(w) for w in args.workers.split(",")]
    out = {"N": N, "D": D, "chunk_rows": chunk_rows}
    if args.rows != 0:  # --rows 0: only the CG-iteration table
        out.update(fourier_table(N, D, chunk_rows, workers))
    n_binning = args.binning_rows if args.binning_rows is not None else (100_000 if args.quick else 400_000)
    out["machine_before"] = _machine()
    binning = binning_cg_iteration(n_binning, args.grids, 50_000, workers, args.repeats) \
        if n_binning and args.iteration_table else []
    n_whole = args.whole_rows if args.whole_rows is not None else (100_000 if args.quick else 400_000)
    chunk_whole = 12_500 if args.quick else 50_000
    whole = binning_whole_call(n_whole, args.grids, chunk_whole, [w for w in workers if w > 1] or workers,
                               args.repeats) if n_whole else []
    out["machine_after"] = _machine()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**out, "binning_cg": binning, "binning_whole_call": whole}, f, indent=1)
    if args.md and whole:
        with open(args.md, "w") as f:
            f.write(whole_call_markdown(whole, out["machine_after"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
