"""Which backend executes a public call: a registry the backends fill, read by the layers below them.

A feature map's public ``fit``/``transform`` must work on a Dask array as on
an in-memory one, yet the maps sit below the backends and may not import
them.  The backends package registers its chooser here when it is imported
(``randfeat/__init__`` imports it, so it is always registered before a user
can call anything); a map asks ``backend_for(X)``.  The choice is made once
per public call: below it, solvers and backends call a map's row kernel on
blocks that are already validated.
"""

_chooser = None


def register_backend_chooser(chooser):
    """Install ``chooser(X) -> backend`` (called once, by ``randfeat._backends``).

    Parameters
    ----------
    chooser : callable
        Returns the backend object that executes a public call on input ``X``.
    """
    global _chooser
    _chooser = chooser


def backend_for(X):
    """Return the backend that executes a public call on ``X`` (the registered chooser's answer).

    Parameters
    ----------
    X : object
        The user's input.

    Returns
    -------
    backend : object
        ``randfeat._backends.in_memory.InMemoryBackend`` or the Dask backend.
    """
    if _chooser is None:
        raise RuntimeError("no execution backend is registered: import randfeat (not only its submodules) first")
    return _chooser(X)
