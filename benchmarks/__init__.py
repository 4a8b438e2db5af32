"""pararl's benchmark suite (not installed with pararl): `python -m benchmarks NAME`.

One module per benchmark, on a shared library (`lib`): the harness, figures and
statistics every benchmark reports with, the whole training processes they time
(`lib.training`), the SB3 anchors (`lib.sb3`) and the time-to-solve part of `dqn` and
`ppo` (`lib.solve`). `python -m benchmarks` lists them.
"""
