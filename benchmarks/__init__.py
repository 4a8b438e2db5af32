"""pararl's benchmark suite (not installed with pararl): `python -m benchmarks NAME`.

Every benchmark runs on one harness (`benchmarks.harness`); `python -m benchmarks`
lists them.
"""
