"""Replay: what off-policy actors (DQN, SAC, TD3) hand the learner and what the learner
samples from.

- `nstep`: n-step transitions (`Transitions`: discrete action indices or continuous
  action vectors) and their builder, from lock-step vector-env steps; truncation
  bootstraps, termination does not;
- `frame_steps`: the same for stacked image observations, each new frame once
  (`FrameSteps` chunks and their builder);
- `uniform`: the ring of whole transitions, sampled uniformly;
- `frame_memory`: the ring of frames, each stored once, stacks rebuilt by links;
- `prioritized` over either, with its `sumtree`;
- `make`: the memory a run's observations call for (`make_replay`).
"""
