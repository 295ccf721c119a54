"""The one reduction tree of the Dask backend: partial results combined pairwise, in block order.

Every reduction over row blocks (ridge statistics, binning vocabularies,
the CG operator's products) goes through ``tree_reduce``: a binary tree
whose shape depends only on the number of blocks, so the result is the
same bits for a given blocking whatever the cluster does.
"""

import sys


def tree_reduce(parts, combine):
    """Return the delayed reduction of ``parts`` (Dask delayed values, in block order) by ``combine``.

    Parameters
    ----------
    parts : list of dask.delayed.Delayed
    combine : callable
        ``combine(a, b)``: the result for the rows of a then b (made a
        delayed task here).

    Returns
    -------
    dask.delayed.Delayed
    """
    import dask

    task = dask.delayed(combine, pure=True)
    while len(parts) > 1:
        parts = [task(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def to_workers(obj):
    """``obj`` as one piece of data for many tasks: scattered once when computing on a distributed Client.

    Without this, a large argument (a D × K direction, a fitted feature
    map) is embedded in the task graph, which Dask warns about and ships
    with every graph.  On a local scheduler the object is used as is.
    """
    if obj is None or "distributed" not in sys.modules:
        return obj
    import distributed
    from dask.base import get_scheduler

    client = getattr(get_scheduler(), "__self__", None)  # the Client whose .get dask.compute will call
    if isinstance(client, distributed.Client):
        return client.scatter(obj, hash=False)
    return obj
