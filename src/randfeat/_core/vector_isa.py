"""Check the ``RANDFEAT_VECTOR_ISA`` environment variable before kernels read it.

The compiled kernels pick their vector code path once, at import, from the
CPU and ``RANDFEAT_VECTOR_ISA`` (see ``_ext/include/randfeat_common.h``).  C cannot
raise a helpful error, so the package checks the value here first.
"""

import os

VECTOR_ISAS = ("auto", "baseline", "avx2", "avx512")


def check_vector_isa_env():
    """Raise ValueError if ``RANDFEAT_VECTOR_ISA`` is set to an unknown value."""
    value = os.environ.get("RANDFEAT_VECTOR_ISA")
    if value is not None and value not in VECTOR_ISAS:
        raise ValueError(
            f"RANDFEAT_VECTOR_ISA={value!r} is not one of {VECTOR_ISAS}; "
            "unset it to let randfeat choose the best path for this CPU"
        )
