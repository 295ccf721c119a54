"""The single source of randfeat's version number."""

__version__ = "0.1.0"
