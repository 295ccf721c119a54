"""The one reduction tree of the Dask backend: partial results combined pairwise, in block order.

Every reduction over row blocks (ridge statistics, binning vocabularies,
the CG operator's products) combines the blocks' values along
``ReductionTree``: a binary tree whose shape depends only on the number of
blocks, so the result is the same bits for a given blocking whatever the
cluster does — as a Dask graph (``tree_reduce``), or evaluated by the
workers that hold the blocks, each summing the subtrees it holds whole
(``ReductionTree.covering``) and one of them the rest (the CG products).
"""

import sys


class _Node:
    """Blocks lo..hi-1 combined: a leaf (one block) or the combination of two nodes."""

    __slots__ = ("lo", "hi", "left", "right")

    def __init__(self, lo, hi, left=None, right=None):
        self.lo, self.hi, self.left, self.right = lo, hi, left, right


class ReductionTree:
    """The pairwise tree over ``n`` blocks: level by level, neighbours combined, an odd last one carried up.

    Parameters
    ----------
    n : int >= 1
    """

    def __init__(self, n):
        parts = [_Node(i, i + 1) for i in range(n)]
        while len(parts) > 1:
            parts = [_Node(parts[i].lo, parts[i + 1].hi, parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                     for i in range(0, len(parts), 2)]
        self.root = parts[0]
        self.n = n

    def covering(self, blocks):
        """Return the largest subtrees whose blocks are all in ``blocks`` (a set of indices), in block order."""
        out = []

        def walk(node):
            if all(i in blocks for i in range(node.lo, node.hi)):
                out.append(node)
            elif node.left is not None:
                walk(node.left)
                walk(node.right)

        walk(self.root)
        return out

    @staticmethod
    def evaluate(node, leaf, combine, known=None):
        """The value of ``node``: ``known[(lo, hi)]`` if given, ``leaf(i)`` for a block, else ``combine(left, right)``."""
        if known is not None and (node.lo, node.hi) in known:
            return known[(node.lo, node.hi)]
        if node.left is None:
            return leaf(node.lo)
        return combine(ReductionTree.evaluate(node.left, leaf, combine, known),
                       ReductionTree.evaluate(node.right, leaf, combine, known))


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

    tree = ReductionTree(len(parts))
    return tree.evaluate(tree.root, parts.__getitem__, dask.delayed(combine, pure=True))


def current_client():
    """The distributed ``Client`` that ``dask.compute`` would use now, or None (a local scheduler)."""
    if "distributed" not in sys.modules:
        return None
    import distributed
    from dask.base import get_scheduler

    client = getattr(get_scheduler(), "__self__", None)  # the Client whose .get dask.compute will call
    return client if isinstance(client, distributed.Client) else None


def to_workers(obj):
    """``obj`` as one piece of data for many tasks: scattered once when computing on a distributed Client.

    Without this, a large argument (a fitted feature map) is embedded in
    the task graph, which Dask warns about and ships with every graph.  On
    a local scheduler the object is used as is.
    """
    client = None if obj is None else current_client()
    return obj if client is None else client.scatter(obj, hash=False)
