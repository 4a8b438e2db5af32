"""The process kernel: child processes with liveness and staged close, shared
arrays allocated once from specs, core topology, and the command wait of a child."""
