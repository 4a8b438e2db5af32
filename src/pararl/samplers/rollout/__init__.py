"""PPO's on-policy rollouts: storage [T, B] filled from a vector env and finished
with GAE advantages (`collect`), or gathered from Ray actors' segments (`ray`)."""
