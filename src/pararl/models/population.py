"""N agents of one architecture as one batched network (`--seeds N`).

Each agent is a network of its own (an `ActorCritic` or a `QNetwork`, as a single run
builds it: its own initialisation, its own checkpoint, acted and evaluated alone), and
every one of its parameters is a view into one stacked tensor `[N, ...]` of the batched
twin (`stacked`). The twin's linear layers multiply each agent's rows by that agent's
weights in one batched matrix product (`StackedLinear`), its convolutions run as one
grouped convolution (`StackedConv2d`; on one CPU thread, each agent's own), and
everything else (activations, flattening, the action heads) runs on the agents' rows
folded into one batch, agent-major: rows `[i * B, (i + 1) * B)` are agent i's. So one
forward and one backward pass serve N agents: a small network's update pays its ~100-270
operator calls once, not N times (Agarwal et al. 2021 ask for many seeds; purejaxrl and
PQN vectorise whole agents in JAX, and `torch.func`'s `stack_module_state` is the same
idea in PyTorch: `vmap(grad(loss))` over stacked parameters took 1.91x these layers'
time per step for 8 CartPole-sized actor-critics on the CPU, and 8 separate steps 3.11x,
`python -m benchmarks handwritten --parts stacked`).

`Population` holds PPO's actor-critics, `QPopulation` DQN's Q-networks (a run's online
networks, or their targets). Observation normalisation and reward scaling keep each
agent's own statistics: the agents' `Normalizer` buffers are views of rows of one
stacked `[N, ...]` buffer each (`StackedNormalizer`), applied to each agent's rows and
updated from each agent's share of a rollout, as its run alone updates them. What
cannot be stacked is refused when the population is built (recurrent cores, the
multi-input encoder): a run with `--seeds` says so in one line before it starts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the usual name

from pararl.models.acting import (
    Acted,
    Draws,
    Mode,
    Observations,
    PopulationDraws,
    State,
    obs_tensor,
)
from pararl.models.heads import acting_mask
from pararl.models.networks import ActorCritic, Encoder, QNetwork, epsilon_greedy
from pararl.models.normalize import Normalizer
from pararl.observations import batch_size
from pararl.optim import is_transposed

M = TypeVar("M", bound=nn.Module)  # one architecture's networks


def _biases(layers: Sequence[nn.Linear] | Sequence[nn.Conv2d]) -> torch.Tensor:
    biases = [layer.bias for layer in layers]
    if any(b is None for b in biases):
        raise ValueError("stacked layers need biases")
    return torch.stack([b.detach() for b in biases if b is not None])


class StackedLinear(nn.Module):
    """N `nn.Linear` layers of one shape: `weight` [N, out, in] and `bias` [N, out];
    input and output rows agent-major ([N * B, in] -> [N * B, out]).

    The stack keeps the agents' layout in memory: where their weights lie as their
    (in, out) transposes (`networks.weights_in_out`: an image trunk's wide layer),
    so does each row of the stack, the batched product reads them as they lie, and
    its gradient comes in that layout (gathered as it comes by
    `optim.RowAdam.backward`). For 4 agents' MinAtar DQN update (1,600 to 128 on
    32 rows each), 7.3 ms against 8.1 row-major, one thread, medians of 12 rounds;
    CartPole's small layers gain nothing so, and keep the layout they have."""

    def __init__(self, layers: Sequence[nn.Linear]) -> None:
        super().__init__()
        self.n = len(layers)
        weights = torch.stack([la.weight.detach() for la in layers])
        if is_transposed(layers[0].weight):
            weights = weights.transpose(1, 2).contiguous().transpose(1, 2)
        self.weight = nn.Parameter(weights)
        self.bias = nn.Parameter(_biases(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(self.n, -1, x.shape[-1])
        y = torch.baddbmm(self.bias.unsqueeze(1), rows, self.weight.transpose(1, 2))
        return y.reshape(-1, y.shape[-1])


class StackedConv2d(nn.Module):
    """N `nn.Conv2d` layers of one shape: `weight` [N, out, in, kh, kw], `bias`
    [N, out]; images agent-major [N * B, in, H, W].

    On a CPU with one intra-op thread each agent's images go through its own
    convolution; otherwise all go through one grouped convolution. oneDNN's grouped
    convolution, forward and backward, took longer on one thread: 8 agents x 256
    MinAtar images (PPO's minibatch), 23.5 ms against 18.1; 4 x 32 with 10 channels,
    1.66 against 1.19; the Nature CNN's first layer on 4 x 32 Atari stacks, 43.8
    against 26.8; but on two threads it spreads over both better than N small ones
    do (8 x 256: 14.6 ms against 15.8; 4 x 32: 0.65 against 0.76). An accelerator
    takes one kernel where N would each pay a launch."""

    def __init__(self, layers: Sequence[nn.Conv2d]) -> None:
        super().__init__()
        first = layers[0]
        if first.groups != 1 or first.padding_mode != "zeros" or first.bias is None:
            raise ValueError("stacked convolutions take plain, biased Conv2d layers")
        self.n = len(layers)
        self.stride, self.padding, self.dilation = first.stride, first.padding, first.dilation
        self.weight = nn.Parameter(torch.stack([c.weight.detach() for c in layers]))
        self.bias = nn.Parameter(_biases(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu" and torch.get_num_threads() == 1:
            return self.each(x)
        return self.grouped(x)

    def each(self, x: torch.Tensor) -> torch.Tensor:
        """Each agent's images through its own convolution."""
        images = x.reshape(self.n, -1, *x.shape[1:]).unbind(0)
        weights, biases = self.weight.unbind(0), self.bias.unbind(0)
        return torch.cat([self._conv(images[i], weights[i], biases[i]) for i in range(self.n)])

    def grouped(self, x: torch.Tensor) -> torch.Tensor:
        """All agents' images through one grouped convolution."""
        n, (c, h, w) = self.n, x.shape[1:]
        # the agents' channels side by side: [B, N * C, H, W], one group per agent
        grouped = x.reshape(n, -1, c, h, w).transpose(0, 1).reshape(-1, n * c, h, w)
        weight = self.weight.reshape(-1, *self.weight.shape[2:])
        out = self._conv(grouped, weight, self.bias.reshape(-1), groups=n)
        o, oh, ow = out.shape[1] // n, out.shape[2], out.shape[3]
        return out.reshape(-1, n, o, oh, ow).transpose(0, 1).reshape(-1, o, oh, ow)

    def _conv(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, groups: int = 1
    ) -> torch.Tensor:
        return F.conv2d(x, weight, bias, self.stride, self.padding, self.dilation, groups)


class StackedNormalizer(nn.Module):
    """N agents' `Normalizer`s: each of their buffers stacked `[N, ...]` (the agents'
    own are views of its rows: `bind`), applied to agent-major rows, each agent's by
    its own statistics. They are updated through the agents' own normalizers
    (`Population.update_norm`), whose in-place writes land in these rows."""

    obs_shift: torch.Tensor
    obs_scale: torch.Tensor
    reward_scale: torch.Tensor

    def __init__(self, norms: Sequence[Normalizer]) -> None:
        super().__init__()
        self.n, self.settings = len(norms), norms[0].settings
        for name, _ in norms[0].named_buffers():
            self.register_buffer(name, torch.stack([m.get_buffer(name) for m in norms]))

    def observe(self, obs: torch.Tensor) -> torch.Tensor:
        """`Normalizer.observe` of agent-major rows, each agent's by its statistics."""
        x = obs.flatten(1).float()
        if not self.settings.obs:
            return x
        rows = x.reshape(self.n, -1, x.shape[-1])
        clip = self.settings.clip_obs
        normed = (rows - self.obs_shift[:, None]) * self.obs_scale[:, None]
        return normed.clamp_(-clip, clip).reshape(x.shape)

    def scale_rewards(self, rewards: np.ndarray) -> np.ndarray:
        """`Normalizer.scale_rewards` of every agent's envs (agent-major), each agent's
        by its own scale, as its run alone computes it."""
        if not self.settings.reward:
            return rewards
        clip, scales = self.settings.clip_reward, self.reward_scale.tolist()
        each = rewards.reshape(self.n, -1)
        return np.concatenate(
            [np.clip(r * scale, -clip, clip) for r, scale in zip(each, scales, strict=True)]
        )


STACKED: dict[type[nn.Module], type[nn.Module]] = {
    nn.Linear: StackedLinear,
    nn.Conv2d: StackedConv2d,
    Normalizer: StackedNormalizer,
}


def stacked(agents: Sequence[M]) -> M:
    """The batched twin of `agents` (networks of one architecture): a copy of the
    first whose linear and convolution layers are stacked over every agent's, and
    whose other parameters (e.g. a Gaussian's `log_std`) are stacked `[N, ...]`.
    Refuses a layer with parameters of another kind (an LSTM, a LayerNorm)."""
    twin = copy.deepcopy(agents[0])
    for name, module in list(twin.named_modules()):
        kind = STACKED.get(type(module))
        if kind is not None:
            layers = [a.get_submodule(name) for a in agents]
            _replace(twin, name, kind(layers))
        elif module is not twin and any(True for _ in module.parameters(recurse=False)):
            raise ValueError(f"cannot stack {type(module).__name__} ({name}) across agents")
    for name, param in list(twin.named_parameters(recurse=False)):
        values = torch.stack([a.get_parameter(name).detach() for a in agents])
        setattr(twin, name, nn.Parameter(values, requires_grad=param.requires_grad))
    return twin


def _replace(root: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, child, module)


def bind(agents: Sequence[nn.Module], twin: nn.Module) -> None:
    """Make every agent's parameter i, and its normalisation statistics, views of row
    i of the twin's stacked ones (call again whenever the twin's tensors move to new
    storage, e.g. into an optimizer's flat rows, or to another device)."""
    for name, param in twin.named_parameters():
        for i, agent in enumerate(agents):
            agent.get_parameter(name).data = param.data[i]
    for name, module in twin.named_modules():
        if isinstance(module, StackedNormalizer):
            for i, agent in enumerate(agents):
                own = agent.get_submodule(name)
                for buffer, value in module.named_buffers(recurse=False):
                    setattr(own, buffer, value[i])


def agent_major(array: np.ndarray, agents: int, steps: int) -> np.ndarray:
    """A flattened rollout's rows (t * (N * E) + i * E + e: agent i's envs side by
    side) as each agent's rollout in turn (i * T * E + t * E + e: agent i's rows as
    its run alone lays them out)."""
    per = array.shape[0] // (steps * agents)
    shaped = array.reshape(steps, agents, per, *array.shape[1:])
    return np.ascontiguousarray(shaped.swapaxes(0, 1)).reshape(array.shape)


def _rows(obs: Any, rows: torch.Tensor) -> Any:
    return obs[rows.to(obs.device)]


class Stack(Generic[M]):
    """What a population's two kinds share: `agents` (each the network a run of its
    seed would build) and their batched twin (`twin`), which holds every agent's
    weights, so its parameters and its state (what a checkpoint of the batch or an
    evaluation process is sent) are the twin's."""

    def __init__(self, agents: Sequence[M]) -> None:
        if len(agents) < 1:
            raise ValueError("a population needs at least one agent")
        self.agents: list[M] = list(agents)
        self.n = len(agents)
        self.twin = stacked(agents)
        bind(self.agents, self.twin)

    def _agents_draws(self, draws: Draws) -> list[Draws]:
        """Each agent's streams of a sampled action (`PopulationDraws`)."""
        if not isinstance(draws, PopulationDraws) or len(draws.agents) != self.n:
            raise ValueError(f"a population of {self.n} samples from PopulationDraws of as many")
        return draws.agents

    def initial_state(self, batch: int) -> State:
        return None

    def parameters(self) -> Any:
        return self.twin.parameters()

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.twin.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """The twin's weights, copied in place: the agents' views see them."""
        self.twin.load_state_dict(state)


def population_of(make: Callable[[], ActorCritic], agents: int) -> Population:
    """A population of `agents` networks from `make` (an evaluation process's: the
    weights come after), picklable when `make` is."""
    return Population([make() for _ in range(agents)])


def q_population_of(make: Callable[[], QNetwork], agents: int) -> QPopulation:
    """`population_of` for Q-networks."""
    return QPopulation([make() for _ in range(agents)])


class Population(Stack[ActorCritic]):
    """N actor-critics trained as one: `agents` (each the network a run of its seed
    would build), `twin` their batched twin, whose parameters hold theirs."""

    def __init__(self, agents: Sequence[ActorCritic]) -> None:
        first = agents[0] if agents else None
        if first is not None and first.core is not None:
            raise ValueError("recurrent cores are not stacked across agents yet")
        if first is not None and first.encoder is not None:
            raise ValueError("the multi-input encoder is not stacked across agents yet")
        super().__init__(agents)
        self.head = self.agents[0].head
        self._envs_per_agent: int | None = None  # of the batch last acted on

    @property
    def norm(self) -> StackedNormalizer:
        """The reward scales a rollout applies (`Rollout.record`), each agent's own."""
        return cast(StackedNormalizer, self.twin.norm)  # `stacked` replaced it

    def update_norm(self, obs: np.ndarray, discounted_returns: np.ndarray, steps: int) -> None:
        """`ActorCritic.update_norm` of each agent, on its share of one rollout (rows t *
        (N * E) + i * E + e, `steps` long): its rows in its run's order (t * E + e)."""
        settings = self.twin.norm.settings
        if not (settings.obs or settings.reward):
            return
        n = self.n
        returns = agent_major(discounted_returns, n, steps).reshape(n, -1)
        # without observation normalisation the observations are not read: no copy of
        # them (an image batch's would be its whole rollout)
        seen = agent_major(obs, n, steps).reshape(n, -1, *obs.shape[1:]) if settings.obs else None
        for i, agent in enumerate(self.agents):
            agent.update_norm(obs[:0] if seen is None else seen[i], returns[i])

    def _log_std_rows(self, rows: int) -> torch.Tensor:
        """Each agent's log standard deviation, on its rows ([N * B, A])."""
        return self.twin.log_std.repeat_interleave(rows // self.n, dim=0)

    def features(self, obs: Any) -> torch.Tensor:
        return self.twin._features(obs)

    def value(
        self, obs: Any, state: State = None, first: Any = None, envs: np.ndarray | None = None
    ) -> torch.Tensor:
        """The state values of agent-major rows, each agent's by its own critic; or
        of rows from the given `envs` of the batch last acted on (agent i's envs its
        i-th block: a truncated episode's last observations), each by its agent's
        network, as its run alone computes them."""
        if envs is None:
            return self.twin.critic(self.features(obs)).squeeze(-1)
        if self._envs_per_agent is None:
            raise ValueError("a population knows its envs' agents once it has acted")
        agents = np.asarray(envs) // self._envs_per_agent
        values = torch.empty(len(agents), device=next(self.twin.parameters()).device)
        for agent in np.unique(agents):
            rows = torch.as_tensor(np.flatnonzero(agents == agent))
            values[rows] = self.agents[agent].value(_rows(obs, rows))
        return values

    def evaluate(
        self, obs: Any, actions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`ActorCritic.evaluate` for every agent's rows at once: log-probabilities,
        entropies and values."""
        features = self.features(obs)
        value = self.twin.critic(features).squeeze(-1)
        out = self.twin.actor(features)
        log_prob, entropy = self.head.evaluate(out, self._log_std_rows(len(out)), actions, mask)
        return log_prob, entropy, value

    @torch.no_grad()
    def act(
        self,
        obs: Observations,
        state: State,
        first: np.ndarray,
        mode: Mode,
        draws: Draws,
        mask: np.ndarray | None = None,
    ) -> Acted:
        """The acting protocol (`models.acting`) over every agent's envs, agent-major:
        one batched forward pass; each agent's sampled actions drawn from its own
        stream (`draws.agents`: `PopulationDraws`), as its run alone would draw."""
        device = next(self.twin.parameters()).device
        features = self.features(obs_tensor(obs, device))
        out = self.twin.actor(features)
        torch_mask = acting_mask(mask, device)
        if mode == "greedy":
            return Acted(self.head.greedy(out, torch_mask).cpu().numpy(), state)
        each = self._agents_draws(draws)
        rows = self._envs_per_agent = batch_size(obs) // self.n
        log_std = self.twin.log_std.detach().cpu()
        out = out.cpu()
        actions, logprobs = [], []
        for i, agent_draws in enumerate(each):
            part = slice(i * rows, (i + 1) * rows)
            agent_mask = None if torch_mask is None else torch_mask[part].cpu()
            action, logprob = self.head.sample(
                out[part], log_std[i], agent_draws.generator, agent_mask
            )
            actions.append(action)
            logprobs.append(logprob)
        value = self.twin.critic(features).squeeze(-1).cpu()
        return Acted(torch.cat(actions).numpy(), state, torch.cat(logprobs).numpy(), value.numpy())


class QPopulation(Stack[QNetwork]):
    """N Q-networks trained as one (DQN's `--seeds`): `agents` (each the network a run
    of its seed would build), `twin` their batched twin, whose parameters hold theirs.
    Called on agent-major rows, it gives each row's Q-values by its agent's network."""

    def __init__(self, agents: Sequence[QNetwork]) -> None:
        if agents and any(isinstance(m, Encoder) for m in agents[0].modules()):
            raise ValueError("the multi-input encoder is not stacked across agents yet")
        super().__init__(agents)
        self.num_actions = self.agents[0].num_actions

    def __call__(self, obs: Any) -> torch.Tensor:
        """Q-values of agent-major rows (tensors), [N * B, actions]."""
        return self.twin(obs)

    @torch.no_grad()
    def act(
        self,
        obs: Observations,
        state: State,
        first: np.ndarray,
        mode: Mode,
        draws: Draws,
        mask: np.ndarray | None = None,
    ) -> Acted:
        """The acting protocol (`models.acting`) over every agent's envs, agent-major:
        one batched forward pass for the greedy actions; `sampled`, each agent's
        epsilon-greedy coins and uniform actions drawn from its own stream with its
        own epsilon (`draws.agents`: `PopulationDraws`), as its run alone draws them."""
        del first
        device = next(self.twin.parameters()).device
        q = self.twin(obs_tensor(obs, device))
        if mask is not None:
            q = q.masked_fill(~torch.as_tensor(mask, device=device), -torch.inf)
        actions = q.argmax(dim=1).cpu().numpy()
        if mode == "greedy":
            return Acted(actions, state)
        each = self._agents_draws(draws)
        rows = len(actions) // self.n
        for i, agent_draws in enumerate(each):
            part = slice(i * rows, (i + 1) * rows)
            agent_mask = None if mask is None else mask[part]
            actions[part] = epsilon_greedy(actions[part], self.num_actions, agent_draws, agent_mask)
        return Acted(actions, state)


__all__ = [
    "Population",
    "QPopulation",
    "Stack",
    "StackedConv2d",
    "StackedLinear",
    "StackedNormalizer",
    "agent_major",
    "bind",
    "population_of",
    "q_population_of",
    "stacked",
]
