"""What benchmarks share: the harness, figures, statistics, training processes, the SB3
anchors, the one learning comparison (`compare`), stepping loops and DQN spells.
"""
