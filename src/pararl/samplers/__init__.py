"""Samplers: how experience is collected (actor processes with their own CPU
policy copies; weights shared through memory)."""
