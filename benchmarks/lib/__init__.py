"""What benchmarks share: `harness` (options, interleaving, tables, publishing),
`figures`, `stats` (summaries of repeated measurements), `training` (start a `pararl
train` process, read its metrics), `sb3` (the Stable-Baselines3 anchors, each its own
process, with a table of how each runs), `compare` (the one learning comparison: pararl
and its SB3 anchor at a budget, curves and ratios; its rows are `mujoco`, `sac`,
`pixels`, `minatar_ab`, the time to solve of `dqn` and `ppo`, and the systems of
`results`), `stepping` (the vector stepping loops: `vector`, `atari`) and `dqn_spells`
(pararl's DQN loop and the DQN post's design in timed spells: `dqn`, `ray`)."""
