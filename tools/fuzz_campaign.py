"""Fuzz campaign: the property checks of tests/trust/test_fuzz.py, run for many examples per target.

The test suite runs a small derandomised profile; this runs ``--examples``
(default 10000) fresh random examples per target and prints, per target,
the examples run, how many were valid inputs (checked against the reference:
NumPy, or scikit-learn's own transformer for its kernel approximations;
across thread counts and through pickle) and how many were invalid ones (no
rows or no columns, or the target's own kind such as negative values for a
χ² map: a ValueError was required).  Any failure stops the campaign with
hypothesis's shrunk counter-example.  The targets are test_fuzz.TARGETS,
so a target added there is run here too.

Usage::

    python tools/fuzz_campaign.py [--examples 10000] [--targets fourier binning ...] [--seed N]
"""

import argparse
import collections
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "trust"))
import test_fuzz  # noqa: E402


def run(name, examples, rng_seed):
    """Run ``examples`` examples of target ``name``; return a Counter of outcomes."""
    counts = collections.Counter()
    strategy, _ = test_fuzz.TARGETS[name]

    @seed(rng_seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def prop(kwargs):
        counts["examples"] += 1
        outcome = test_fuzz.run_target(name, **kwargs)
        counts[outcome or ("invalid (ValueError required)" if test_fuzz._empty(kwargs["X"][0]) else "valid")] += 1

    prop()
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="examples per target (default 10000)")
    parser.add_argument("--targets", nargs="*", default=sorted(test_fuzz.TARGETS), choices=sorted(test_fuzz.TARGETS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    total = 0
    for name in args.targets:
        t0 = time.perf_counter()
        counts = run(name, args.examples, args.seed)
        total += counts["examples"]
        detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "examples")
        print(f"{name}: {counts['examples']} examples ({detail}), {time.perf_counter() - t0:.1f} s, no failure",
              flush=True)
    print(f"total: {total} examples, no failure")


if __name__ == "__main__":
    main()
