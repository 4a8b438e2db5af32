"""What benchmarks share: `harness` (options, interleaving, tables, publishing),
`figures`, `stats` (summaries of repeated measurements), `training` (start a `pararl
train` process, read its metrics), `sb3` (the Stable-Baselines3 anchors, each its own
process), `solve` (time to solve CartPole-v1: `dqn`, `ppo`), `stepping` (the vector
stepping loops: `vector`, `atari`) and `dqn_spells` (pararl's DQN loop and the DQN post's
design in timed spells: `dqn`, `ray`)."""
