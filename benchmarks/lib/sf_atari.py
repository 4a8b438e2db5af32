"""Sample Factory's Atari trainer with ALE's envs registered, run by the Python of its
own environment (`lib.sf_anchor`), never imported by pararl's: gymnasium 0.29
finds the ALE envs only once `ale_py` is imported, which Sample Factory's example
leaves to a plugin that ale-py 0.9 (the release that ships the ROMs) no longer has.
This file is the main module of Sample Factory's worker processes too, so each of
them registers the envs as it starts.
"""

import sys

import ale_py  # noqa: F401  (registers the ALE envs)
from sf_examples.atari.train_atari import main

if __name__ == "__main__":
    sys.exit(main())
