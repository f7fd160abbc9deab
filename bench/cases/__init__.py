"""Benchmark cases: each module defines ``CASES``, a list of :class:`bench.core.Case`."""
