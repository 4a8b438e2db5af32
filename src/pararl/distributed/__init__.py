"""Training across processes and machines with torch.distributed: `launch.py` forms
the process group (ranks spawned here on one machine, or the ranks `torchrun`
started on one or many) and carries the group's own messages (a start state for
all, an agreed flag). Averaging the replicas' weights is `pararl.weights.averaging`.
"""
