"""The Ray backend (`--backend ray`): actors on a Ray cluster instead of local
processes, the learner in the driver (this process).

- `cluster`: importing Ray (an optional extra), joining or starting a cluster;
- `pool`: a group of Ray actors spread over the nodes, weights broadcast with one
  `ray.put` per version, requests in flight and their results;
- `faults`: what happens when an actor dies (restart, log, resend) or goes silent;
- `dqn_actor` / `dqn_pool`: DQN actors sending n-step transition chunks, and the
  chunk source the async DQN learner loop takes them from;
- `ppo_actor` / `ppo_runner`: PPO actors returning rollout segments, gathered into
  one rollout per update.

Ray is imported only here, and only when `--backend ray` is asked for.
"""
