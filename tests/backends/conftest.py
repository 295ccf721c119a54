"""The Dask test files' shared fixtures: the synchronous scheduler, and one LocalCluster for the session.

The synchronous scheduler runs the backends' code paths without processes;
the cluster (two worker processes, one thread each) is started once, the
first time a test asks for it, and shared by every Dask test file here.
"""

import pytest


@pytest.fixture
def sync():
    """Dask's synchronous scheduler for the test's duration."""
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture(scope="session")
def cluster_client():
    """A ``distributed.Client`` of a two-process LocalCluster, shared by the session."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client
