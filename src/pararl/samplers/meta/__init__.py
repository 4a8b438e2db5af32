"""The multi-task (meta-RL) sampler of seeds/001 (`sampler.MultiTaskSampler`): fixed-
length episodes per task (`episodes`), and how it takes results back from the
workers: the recv policies (`recv`), the measuring one (`auto`) and its cost model
(`auto_model`)."""
