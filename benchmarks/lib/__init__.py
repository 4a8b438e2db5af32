"""What every benchmark shares: `harness` (options, interleaving, tables, publishing),
`figures`, `stats` (summaries of repeated measurements), `training` (start a `pararl
train` process, read its metrics), `sb3` (the Stable-Baselines3 anchors, each its own
process) and `solve` (time to solve CartPole-v1)."""
