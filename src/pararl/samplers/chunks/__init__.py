"""DQN's actors and the chunks they hand the learner: the interface (`source`),
acting in this process (`local`), in actor processes with shared-memory outboxes
(`actor_pool`, running `actor`), on Ray (`ray`); epsilon-greedy exploration
(`explore`)."""
