"""The Ray backend (`--backend ray`): actors on a Ray cluster instead of local
processes, the learner in the driver (this process).

- `cluster`: importing Ray (an optional extra), joining or starting a cluster;
- `pool`: a group of Ray actors spread over the nodes, each request carrying the
  newest weights (`weights.ray`), requests in flight and their results;
- `faults`: what happens when an actor dies (restart, log, resend) or goes silent.

The families run on it: DQN's chunk source (`samplers.chunks.ray`) and PPO's
rollout segments (`samplers.rollout.ray`). Ray is imported only here, and only when
`--backend ray` is asked for.
"""
