"""Off-policy actors (DQN, SAC, TD3) and the chunks they hand the learner: the interface
(`source`), acting in this process (`local`), in actor processes with shared-memory
outboxes (`actor_pool`, running `actor`), on Ray (`ray`); how actors choose actions
(`explore`: DQN's epsilon-greedy, SAC's squashed Gaussian)."""
