"""Training across processes and machines with torch.distributed.

`averaging.py` holds the collective math (averaging tensors, agreeing on a flag);
`launch.py` forms the process group: ranks spawned here on one machine, or the ranks
`torchrun` started on one or many machines.
"""
