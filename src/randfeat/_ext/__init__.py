"""randfeat's compiled kernels (Cython and the C/C++ headers in ``include/``).

The lowest layer: the kernels take typed arrays and a thread count, release
the GIL and hold no policy.  They trust their inputs, so everything they
read is validated by the Python layers above (``randfeat._core.validation``
and the layer that calls them).  Nothing here imports the rest of randfeat.
"""
