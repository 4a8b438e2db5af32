"""The multi-task (meta-RL) sampler of the parallel-sampling post (docs/design/sources.md;
`sampler.MultiTaskSampler`): fixed-length episodes per task (`episodes`), and how it
takes results back from the workers: the recv policies (`recv`), the measuring one
(`auto`) and its cost model (`auto_model`)."""
