"""PPO for N agents in one batched update (`--seeds N`): each agent's minibatch epochs
as its run alone would take them, all agents' minibatches in one forward and
backward pass through the population's batched twin (`models.population`), each
agent's gradient clipped and stepped by its own row of one Adam (`optim.RowAdam`).

Agent i of a population and a run of its seed alone see the same rollouts, draw the
same minibatches (its own random stream) and take the same steps; only the order of
floating-point reductions differs (a batched matrix product instead of one, the
per-row gradient norm, one more rounding in Adam's step), so their weights agree to
float tolerance, not bit for bit (tests/algos/test_population.py).

Its loss may run compiled (`step_mode` "compile": `torch.compile` through
`algos.fused`, the forward pass and the backward AOT autograd derives from it; the
gradients are then clipped and stepped as written). 8 CartPole agents' batched step
on one thread: 1.38 ms compiled against 2.0 as written; in whole runs (8 x 100k
steps, async, 2 cores, two each) 369-410 batched updates/s against 255-308, the
~7 s compile included (2026-11-30).

DQN's (`PopulationDQNLearner`): each agent's minibatch drawn from its own replay
memory with its own stream, one forward and backward pass of the online twin (and one
of the target twin), each agent's TD loss averaged over its own rows, its gradient
clipped and stepped by its own row of one optimizer (Adam or centred RMSProp), and
its target network a row of one matrix laid out as the optimizer's, so a Polyak or
hard update of every agent is one op. An update may leave some agents out (those
whose run alone would not update now: their memories became ready a step later), so
every agent keeps its own update count. The optimizer's arithmetic is FlatAdam's
and FlatRMSprop's bit for bit, per-row clipping included (tests/test_optim.py); the
batched layers' products (a batched matrix product, a grouped convolution) and each
agent's mean loss over its rows round in another order than one network's, so agents
agree with their runs alone to float tolerance (tests/algos/test_dqn_population.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the usual name

from pararl.algos.dqn import make_row_optimizer
from pararl.algos.fused import FusedSteps, StepMode
from pararl.algos.ppo import LOSS_KEYS, PPOHyper, ppo_loss
from pararl.config import DQNConfig
from pararl.models.acting import obs_tensor
from pararl.models.networks import QNetwork
from pararl.models.population import Population, QPopulation, agent_major, bind
from pararl.optim import RowAdam, row_views
from pararl.replay.nstep import Transitions

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
        step_mode: StepMode = "eager",
    ) -> None:
        """`step_mode`: how the loss runs, "eager" (as written) or "compile"."""
        if step_mode not in ("eager", "compile"):
            raise ValueError(f"a population's loss runs eager or compiled, not {step_mode!r}")
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
        self.step_mode = step_mode
        self.steps: FusedSteps[bool] = FusedSteps(step_mode, device)  # by: with masks
        self.clip_t = torch.zeros((), device=device)  # a shared clip range, compiled

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
        clip = self._rows(self.clip, len(advantages) // n)
        if self.step_mode != "eager" and not isinstance(clip, torch.Tensor):
            # an annealed clip range changes every update: a compiled loss reads it
            # from a tensor, so that one program serves all of them
            clip = self.clip_t.fill_(clip)
        loss = self.steps.get("masks" in mb, lambda: self._loss)
        total, pg_loss, v_loss, entropy, ratio, log_ratio = loss(mb, advantages, clip)
        self.optimizer.backward(total)  # the agents' losses share no weight
        max_norm = self.coef["max_grad_norm"]
        self.optimizer.clip_grad_norm_(
            max_norm if isinstance(max_norm, float) else max_norm[:, None]
        )
        self.optimizer.step()
        stats = {"pg_loss": pg_loss.detach(), "v_loss": v_loss.detach()}
        stats["entropy"] = entropy.detach()
        if with_kl:
            with torch.no_grad():
                stats["approx_kl"] = self._mean((ratio - 1) - log_ratio)
                stats["clipfrac"] = self._mean(((ratio - 1.0).abs() > clip).float())
        return stats

    def _mean(self, x: torch.Tensor) -> torch.Tensor:
        """Each agent's mean over its rows ([N * B] -> [N])."""
        return x.reshape(self.n, -1).mean(1)

    def _loss(
        self, mb: dict[str, torch.Tensor], advantages: torch.Tensor, clip: float | torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Every agent's PPO loss on its minibatch, summed (for autograd), each agent's
        losses and entropy ([N]), and the importance ratios and their logs (detached)."""
        evaluated = self.population.evaluate(mb["obs"], mb["actions"], mb.get("masks"))
        rows = len(advantages) // self.n
        coefs = AgentCoefs(
            self.hyper.clip_vloss,
            self._rows(self.coef["clip_coef"], rows),
            self.coef["ent_coef"],
            self.coef["vf_coef"],
        )
        out = ppo_loss(coefs, evaluated, mb, advantages, clip, self._mean)
        names = ("pg_loss", "v_loss", "entropy", "ratio", "log_ratio")
        return (out["loss"].sum(), *(out[k] for k in names))

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


class PopulationDQNLearner:
    """DQN's learner (`algos.dqn.DQNLearner`, eager) for a population: `online` the
    agents' Q-networks, `targets` their target networks (each agent's as its run
    built it), trained with the one config's settings."""

    def __init__(
        self,
        online: QPopulation,
        targets: QPopulation,
        config: DQNConfig,
        device: torch.device,
    ) -> None:
        self.online, self.targets = online, targets
        self.n = online.n
        self.config, self.settings = config, config.settings
        self.device = device
        online.twin.to(device)
        self.optimizer = make_row_optimizer(online.twin, self.settings.optimizer, self.settings.lr)
        bind(online.agents, online.twin)  # the optimizer moved the weights
        # the targets: one matrix laid out as the optimizer's rows
        targets.twin.to(device).requires_grad_(False)
        self.target_flat = torch.empty_like(self.optimizer.flat)
        row_views(targets.twin.parameters(), self.target_flat, self.optimizer.params)
        bind(targets.agents, targets.twin)
        self.updates = np.zeros(self.n, np.int64)  # each agent's

    def _tensor(self, array: Any, dtype: torch.dtype) -> torch.Tensor:
        return torch.as_tensor(array, dtype=dtype).to(self.device, non_blocking=True)

    def update(self, batches: Sequence[Transitions | None]) -> dict[str, torch.Tensor]:
        """One gradient step of every agent given a batch (`batches[i]`, drawn from
        its own memory), none of those given None; each agent's loss and mean Q ([N];
        an agent left out gets the numbers of rows that are not its own)."""
        rows = np.array([b is not None for b in batches])
        given = [b for b in batches if b is not None]
        if len(batches) != self.n or not given:
            raise ValueError(f"a population of {self.n} updates on {self.n} batches, one or more")
        # an agent left out computes on another's batch; its step is dropped
        batch = Transitions.concat([b if b is not None else given[0] for b in batches])
        obs = obs_tensor(batch.obs, self.device)
        next_obs = obs_tensor(batch.next_obs, self.device)
        actions = self._tensor(batch.action, torch.int64)
        next_mask = None
        if batch.next_mask is not None:
            next_mask = self._tensor(batch.next_mask, torch.bool)
        with torch.no_grad():  # `DQNLearner._step`, on every agent's rows
            next_q_target = self.targets(next_obs)
            if self.settings.double_dqn:
                next_q = self.online(next_obs)
                if next_mask is not None:
                    next_q = next_q.masked_fill(~next_mask, -torch.inf)
                next_actions = next_q.argmax(dim=1, keepdim=True)
                next_value = next_q_target.gather(1, next_actions).squeeze(1)
            else:
                if next_mask is not None:
                    next_q_target = next_q_target.masked_fill(~next_mask, -torch.inf)
                next_value = next_q_target.max(dim=1).values
            ret = self._tensor(batch.ret, torch.float32)
            td_target = ret + self._tensor(batch.discount, torch.float32) * next_value
        q_taken = self.online(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
        per_sample = F.smooth_l1_loss(q_taken, td_target, reduction="none")
        loss = per_sample.reshape(self.n, -1).mean(1)
        self.optimizer.zero_grad()
        self.optimizer.backward(loss.sum())  # the agents' losses share no weight
        self.optimizer.clip_grad_norm_(self.config.max_grad_norm)
        self.optimizer.step(rows)
        self.updates[rows] += 1
        self._update_targets(rows)
        return {"loss": loss.detach(), "q_mean": q_taken.detach().reshape(self.n, -1).mean(1)}

    @torch.no_grad()
    def _update_targets(self, rows: np.ndarray) -> None:
        """`DQNLearner._update_target` for the agents updated (`rows`): Polyak
        averaging every update, or a copy every `target_update`-th of each agent's."""
        online, target = self.optimizer.flat, self.target_flat
        if self.config.tau < 1.0:
            if rows.all():
                target.lerp_(online, self.config.tau)
                return
            index = torch.as_tensor(np.flatnonzero(rows), device=target.device)
            moved = target.index_select(0, index).lerp_(
                online.index_select(0, index), self.config.tau
            )
            target.index_copy_(0, index, moved)
            return
        due = rows & (self.updates % self.settings.target_update == 0)
        if due.any():
            index = torch.as_tensor(np.flatnonzero(due), device=target.device)
            target.index_copy_(0, index, online.index_select(0, index))

    def agent_state(self, i: int) -> dict[str, Any]:
        """Agent i's learner as `DQNLearner.state_dict` saves a run's (its own copies of
        the rows: a checkpoint does not carry every agent's weights for each one)."""
        return {
            "q": _own(self.online.agents[i].state_dict()),
            "q_target": _own(self.targets.agents[i].state_dict()),
            "optimizer": self.optimizer.row_state(i),
            "updates": int(self.updates[i]),
        }

    def load_agent_state(self, i: int, state: dict[str, Any]) -> None:
        self.online.agents[i].load_state_dict(state["q"])  # copied into its rows
        self.targets.agents[i].load_state_dict(state["q_target"])
        self.optimizer.load_row_state(i, state["optimizer"])
        self.updates[i] = int(state["updates"])

    def agent(self, i: int) -> AgentLearner:
        return AgentLearner(self, i)


def _own(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict's tensors copied out of the storage they view."""
    out = type(state)((k, v.detach().clone()) for k, v in state.items())
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        out._metadata = metadata  # type: ignore[attr-defined]
    return out


class AgentLearner:
    """Agent i of a population's learner as a run's state (`algos.dqn.DQNState`)
    sees its learner: its networks, its update count, its saved state; the
    population makes its updates (`PopulationDQNLearner.update`)."""

    step_mode = "eager"

    def __init__(self, population: PopulationDQNLearner, i: int) -> None:
        self.population, self.i = population, i

    @property
    def q(self) -> QNetwork:
        return self.population.online.agents[self.i]

    @property
    def q_target(self) -> QNetwork:
        return self.population.targets.agents[self.i]

    @property
    def device(self) -> torch.device:
        return self.population.device

    @property
    def updates(self) -> int:
        return int(self.population.updates[self.i])

    def update(
        self, batch: Transitions, weights: np.ndarray | None = None
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        raise RuntimeError("an agent of a population is updated with the others, in one pass")

    def state_dict(self) -> dict[str, Any]:
        return self.population.agent_state(self.i)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.population.load_agent_state(self.i, state)


def _normalized(advantages: torch.Tensor, n: int) -> torch.Tensor:
    """Each agent's advantages normalised over its own rows (`algos.ppo._normalized`)."""
    a = advantages.reshape(n, -1)
    return ((a - a.mean(1, keepdim=True)) / (a.std(1, keepdim=True) + 1e-8)).reshape(-1)


__all__ = ["AgentLearner", "PopulationDQNLearner", "PopulationPPOLearner", "agent_major"]
