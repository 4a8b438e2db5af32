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
from dataclasses import dataclass, fields
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


# the settings each agent may have its own of (`--sweep`); the rest shape the update
PER_AGENT = ("clip_coef", "ent_coef", "vf_coef", "max_grad_norm")


@dataclass(frozen=True)
class AgentCoefs:
    """The loss's settings for a minibatch of every agent's rows (`ppo_loss` reads
    them): one number for all, or one per agent ([N]: the entropy and value weights,
    which scale each agent's loss) or per row ([N * B]: the value clip)."""

    clip_vloss: bool
    clip_coef: float | torch.Tensor
    ent_coef: float | torch.Tensor
    vf_coef: float | torch.Tensor


class PopulationPPOLearner:
    """PPO's learner (`algos.ppo.PPOLearner`) for a population: each agent's settings
    (`hypers`, one per agent) may differ in `PER_AGENT`'s and the learning rate
    (`lr`: one, or one per agent), not in what shapes the update."""

    def __init__(
        self,
        population: Population,
        hypers: PPOHyper | Sequence[PPOHyper],
        lr: float | Sequence[float],
        device: torch.device,
    ) -> None:
        self.population = population
        self.n = n = population.n
        each = [hypers] * n if isinstance(hypers, PPOHyper) else list(hypers)
        if len(each) != n:
            raise ValueError(f"{len(each)} settings for {n} agents")
        shared = [
            tuple(getattr(h, f.name) for f in fields(h) if f.name not in PER_AGENT) for h in each
        ]
        if any(h != shared[0] for h in shared):
            raise ValueError("a population's agents differ only in " + ", ".join(PER_AGENT))
        self.hyper, self.device = each[0], device
        # each setting: one number when the agents share it (the loss then runs as
        # one agent's), else a tensor [N]
        self.coef: dict[str, float | torch.Tensor] = {}
        for name in PER_AGENT:
            values = [float(getattr(h, name)) for h in each]
            same = len(set(values)) == 1
            self.coef[name] = values[0] if same else torch.tensor(values, device=device)
        population.twin.to(device)
        self.optimizer = RowAdam(population.twin.parameters(), lr=lr, eps=1e-5)
        bind(population.agents, population.twin)  # the optimizer moved the weights
        self.updates = 0
        self.clip = self.coef["clip_coef"]  # the surrogate's clip range now (annealed)

    def set_lr_fraction(self, fraction: float) -> None:
        self.optimizer.set_lr_fraction(fraction)

    def set_clip_fraction(self, fraction: float) -> None:
        self.clip = self.coef["clip_coef"] * fraction

    def _rows(self, value: float | torch.Tensor, rows: int) -> float | torch.Tensor:
        """A per-agent setting on each agent's rows ([N * rows]); a shared one as it is."""
        return value.repeat_interleave(rows) if isinstance(value, torch.Tensor) else value

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

        rows = len(advantages) // n
        coefs = AgentCoefs(
            hp.clip_vloss,
            self._rows(self.coef["clip_coef"], rows),
            self.coef["ent_coef"],
            self.coef["vf_coef"],
        )
        clip = self._rows(self.clip, rows)
        out = ppo_loss(coefs, evaluated, mb, advantages, clip, mean)
        out["loss"].sum().backward()  # the agents' losses share no weight
        max_norm = self.coef["max_grad_norm"]
        self.optimizer.clip_grad_norm_(
            max_norm if isinstance(max_norm, float) else max_norm[:, None]
        )
        self.optimizer.step()
        stats = {k: out[k].detach() for k in ("pg_loss", "v_loss", "entropy")}
        if with_kl:
            with torch.no_grad():
                ratio, log_ratio = out["ratio"], out["log_ratio"]
                stats["approx_kl"] = mean((ratio - 1) - log_ratio)
                stats["clipfrac"] = mean(((ratio - 1.0).abs() > clip).float())
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
