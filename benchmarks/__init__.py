"""pararl's benchmark suite (not installed with pararl): `python -m benchmarks NAME`.

One module per benchmark (a large one keeps its own helpers beside it: `atari_runners`,
`atari_profile`, `maml_seed`), on a shared library, `lib`: the harness, figures and
statistics every benchmark reports with, the training processes they time, the SB3
anchors, the one learning comparison (`lib.compare`: a benchmark that trains pararl and
SB3 and compares their curves is a table of its rows), and what two benchmarks share.
`python -m benchmarks --list` names them.
"""
