"""Make the Performance page's tables from the committed ``bench/results``.

docs/conf.py calls :func:`write_tables` at every build.  Each Markdown file a
bench script wrote (``bench/results/**/*.md``) is copied into
``docs/_generated/perf/`` with its headings turned into bold lines (the page
gives the sections; a results file's own title would nest wrongly), and the
JSON-only results (``scale_out.json``) are rendered as a Markdown table.
``performance.md`` includes these files, so refreshing a bench result
(``python bench/table1.py --quick --refresh-committed`` and the like)
refreshes the page at the next build: no number is copied by hand.
"""

import json
import os
import re

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _flatten_headings(text):
    out = []
    for line in text.splitlines():
        m = _HEADING.match(line)
        out.append(f"**{m.group(2)}**" if m else line)
    return "\n".join(out).rstrip() + "\n"


def _scale_out_table(data):
    """bench/scale_out.py's JSON as Markdown (it writes no Markdown of its own)."""
    lines = [
        f"N = {data['N']:,} rows, D = {data['D']}, {data['n_blocks']} blocks of {data['chunk_rows']:,} rows.",
        "",
        "| configuration | wall (s) | total CPU (s) | worker peak RSS (MB) | coefficients vs in-memory (rel.) |",
        "|---|---:|---:|---|---:|",
    ]
    for row in data["rows"]:
        peaks = ", ".join(str(p) for p in row.get("worker_peak_rss_mb", [])) or "—"
        diff = f"{row['coef_rel_diff']:.1e}" if "coef_rel_diff" in row else "—"
        lines.append(f"| {row['config']} | {row['wall_s']:.1f} | {row['cpu_s']:.1f} | {peaks} | {diff} |")
    return "\n".join(lines) + "\n"


def _cg_table(data):
    """The CG table of bench/scale_out.py's JSON (``--rows 0``: Binning+LS by CG, per iteration)."""
    first = data["binning_cg"][0]
    shape = (f"{first['rows']:,} × 54 float32 rows in blocks of {first['chunk_rows']:,}, {first['grids']} grids, "
             "one target; " if "rows" in first else "")
    lines = [
        f"Binning+LS by CG, features kept on the workers ({shape}`Ridge(solver='cg')`): "
        f"seconds per CG iteration by the solver's own clock "
        f"(iterations 10 to the last), in memory on all cores and on a LocalCluster of one-thread workers, "
        f"{len(data['binning_cg'][0]['ratios'])} alternating runs, medians and the median of the same-run ratios.",
        "",
        "| LocalCluster | in memory (s/iteration) | cluster (s/iteration) | cluster / in memory (same run) | runs |",
        "|---|---:|---:|---:|---|",
    ]
    for row in data["binning_cg"]:
        runs = ", ".join(f"{r:.2f}" for r in row["ratios"])
        lines.append(f"| {row['workers']} workers | {row['in_memory_s']:.4f} | {row['cluster_s']:.4f} | "
                     f"{row['ratio_median']:.2f} | {runs} |")
    return "\n".join(lines) + "\n"


def _write_if_changed(path, text):
    # Rewrite only on change so incremental builds stay incremental.
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_tables(results_dir, out_dir):
    """Write one Markdown file per bench result into ``out_dir``; return their names.

    ``bench/results/quick/binning.md`` becomes ``quick__binning.md``.
    """
    os.makedirs(out_dir, exist_ok=True)
    written = set()
    for folder, _, files in os.walk(results_dir):
        for name in sorted(files):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, results_dir).replace(os.sep, "__")
            if name.endswith(".md"):
                with open(path, encoding="utf-8") as f:
                    text = _flatten_headings(f.read())
            elif name in ("scale_out.json", "scale_out_cg.json"):
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
                parts = [_scale_out_table(data)] if data.get("rows") else []
                parts += [_cg_table(data)] if data.get("binning_cg") else []
                text = "\n".join(parts)
                rel = rel[: -len(".json")] + ".md"
            else:
                continue
            _write_if_changed(os.path.join(out_dir, rel), text)
            written.add(rel)
    for stale in set(os.listdir(out_dir)) - written:
        os.remove(os.path.join(out_dir, stale))
    return sorted(written)
