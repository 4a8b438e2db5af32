"""pararl's benchmark suite (not installed with pararl): `python -m benchmarks NAME`."""
