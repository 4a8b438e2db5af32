"""PPO for N agents in one batched update (`--seeds N`): each agent's minibatch epochs
as its run alone would take them, all agents' minibatches in one forward and
backward pass through the population's batched twin (`models.population`), each
agent's gradient clipped and stepped by its own row of one Adam (`optim.RowAdam`).

Agent i of a population and a run of its seed alone see the same rollouts, draw the
same minibatches (its own random stream) and take the same steps; only the order of
floating-point reductions differs (a batched matrix product instead of one, the
per-row gradient norm, one more rounding in Adam's step), so their weights agree to
float tolerance, not bit for bit (tests/algos/test_population.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from pararl.algos.ppo import LOSS_KEYS, PPOHyper, ppo_loss
from pararl.models.population import Population, bind
from pararl.optim import RowAdam


def agent_major(array: np.ndarray, agents: int, steps: int) -> np.ndarray:
    """A flattened rollout's rows (t * (N * E) + i * E + e: agent i's envs side by
    side) as each agent's rollout in turn (i * T * E + t * E + e: agent i's rows as
    its run alone lays them out)."""
    per = array.shape[0] // (steps * agents)
    shaped = array.reshape(steps, agents, per, *array.shape[1:])
    return np.ascontiguousarray(shaped.swapaxes(0, 1)).reshape(array.shape)


class PopulationPPOLearner:
    """PPO's learner (`algos.ppo.PPOLearner`) for a population: the same settings for
    every agent except each one's learning rate (`lr`: one, or one per agent)."""

    def __init__(
        self,
        population: Population,
        hyper: PPOHyper,
        lr: float | Sequence[float],
        device: torch.device,
    ) -> None:
        self.population = population
        self.n = population.n
        self.hyper, self.device = hyper, device
        population.twin.to(device)
        self.optimizer = RowAdam(population.twin.parameters(), lr=lr, eps=1e-5)
        bind(population.agents, population.twin)  # the optimizer moved the weights
        self.updates = 0
        self.clip = hyper.clip_coef

    def set_lr_fraction(self, fraction: float) -> None:
        self.optimizer.set_lr_fraction(fraction)

    def set_clip_fraction(self, fraction: float) -> None:
        self.clip = self.hyper.clip_coef * fraction

    def update(
        self, batch: dict[str, Any], num_steps: int, rngs: Sequence[np.random.Generator]
    ) -> dict[str, np.ndarray]:
        """`PPOLearner.update` for every agent at once, on one flattened rollout of
        the population's envs (agent i's are the i-th block of the env axis; each
        step `num_steps` long); agent i's minibatch order drawn from `rngs[i]`.
        Returns each statistic per agent ([N])."""
        hp, n = self.hyper, self.n
        keys = (*LOSS_KEYS, *(k for k in ("masks",) if k in batch))
        b = {k: self._on_device(agent_major(batch[k], n, num_steps)) for k in keys}
        size = len(b["advantages"]) // n  # rows per agent
        mb_size = max(1, size // hp.num_minibatches)
        normalized = hp.norm_adv and mb_size >= size  # one minibatch: normalise once
        if normalized:
            b["advantages"] = _normalized(b["advantages"], n)
        totals: dict[str, torch.Tensor] = {}
        starts = torch.arange(n, device=self.device)[:, None] * size
        for epoch in range(hp.update_epochs):
            last = epoch == hp.update_epochs - 1
            if mb_size >= size:
                minibatches: Any = [b]
            else:
                order = np.stack([rng.permutation(size) for rng in rngs])
                order_t = torch.as_tensor(order, device=self.device) + starts
                minibatches = (
                    {k: v[order_t[:, s : s + mb_size].reshape(-1)] for k, v in b.items()}
                    for s in range(0, size - mb_size + 1, mb_size)
                )
            for mb in minibatches:
                stats = self._step(mb, normalized, last)
                for k, v in stats.items():
                    totals[k] = totals[k] + v if k in totals else v
                self.updates += 1
        per_epoch = size // mb_size
        counts = {"approx_kl": per_epoch, "clipfrac": per_epoch}
        return {
            k: v.cpu().numpy() / counts.get(k, hp.update_epochs * per_epoch)
            for k, v in totals.items()
        }

    def _on_device(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array).to(self.device)

    def _step(
        self, mb: dict[str, torch.Tensor], normalized: bool, with_kl: bool
    ) -> dict[str, torch.Tensor]:
        """One gradient step of every agent on its minibatch (agent-major rows);
        each statistic per agent ([N])."""
        hp, n = self.hyper, self.n
        advantages = mb["advantages"]
        if hp.norm_adv and not normalized:
            advantages = _normalized(advantages, n)
        self.optimizer.zero_grad()
        evaluated = self.population.evaluate(mb["obs"], mb["actions"], mb.get("masks"))

        def mean(x: torch.Tensor) -> torch.Tensor:
            return x.reshape(n, -1).mean(1)

        out = ppo_loss(hp, evaluated, mb, advantages, self.clip, mean)
        out["loss"].sum().backward()  # the agents' losses share no weight
        self.optimizer.clip_grad_norm_(hp.max_grad_norm)
        self.optimizer.step()
        stats = {k: out[k].detach() for k in ("pg_loss", "v_loss", "entropy")}
        if with_kl:
            with torch.no_grad():
                ratio, log_ratio = out["ratio"], out["log_ratio"]
                stats["approx_kl"] = mean((ratio - 1) - log_ratio)
                stats["clipfrac"] = mean(((ratio - 1.0).abs() > self.clip).float())
        return stats

    def agent_state(self, i: int) -> dict[str, Any]:
        """Agent i's learner as `PPOLearner.state_dict` saves a run's."""
        return {
            "model": self.population.agents[i].state_dict(),
            "optimizer": self.optimizer.row_state(i),
            "updates": self.updates,
        }

    def load_agent_state(self, i: int, state: dict[str, Any]) -> None:
        with torch.no_grad():
            for name, value in state["model"].items():
                target = self.population.agents[i].state_dict()[name]
                target.copy_(value)
        self.optimizer.load_row_state(i, state["optimizer"])
        self.updates = int(state["updates"])


def _normalized(advantages: torch.Tensor, n: int) -> torch.Tensor:
    """Each agent's advantages normalised over its own rows (`algos.ppo._normalized`)."""
    a = advantages.reshape(n, -1)
    return ((a - a.mean(1, keepdim=True)) / (a.std(1, keepdim=True) + 1e-8)).reshape(-1)


__all__ = ["PopulationPPOLearner", "agent_major"]
