"""Neural networks: MLP bodies and trunks, the DQN Q-network, PPO's actor-critic.

How their weights travel to acting copies is `pararl.weights`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from pararl.intraop import torch_threads
from pararl.models.acting import (
    Acted,
    Draws,
    FeedForward,
    Mode,
    Observations,
    State,
    device_of,
    obs_tensor,
)
from pararl.models.heads import ActionHead, acting_mask, default_head
from pararl.models.normalize import OFF, Normalizer, NormSettings
from pararl.models.recurrent import CoreSettings, RecurrentCore, Sequences
from pararl.models.tanh import Tanh
from pararl.observations import batch_size


def mlp(
    in_dim: int, hidden: Sequence[int], out_dim: int, activation: type[nn.Module] = nn.ReLU
) -> nn.Sequential:
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [nn.Linear(last, width), activation()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


class QNetwork(FeedForward, nn.Module):
    """Q(s, ·) for a discrete action set: an MLP on the flattened observation, or a
    `trunk` (an image network, `models.cnn`) with a linear head. `dueling`: the head
    is a value and an advantage stream, Q = V + A - mean(A) (Wang et al. 2016)."""

    def __init__(
        self,
        obs_dim: int,
        num_actions: int,
        hidden: Sequence[int] = (256, 256),
        trunk: Trunk | None = None,
        dueling: bool = False,
    ) -> None:
        super().__init__()
        self.obs_dim, self.num_actions, self.hidden = obs_dim, num_actions, tuple(hidden)
        self.dueling = dueling
        self.trunk = trunk
        if trunk is None and not dueling:
            self.net: nn.Module = mlp(obs_dim, hidden, num_actions)
            return
        if trunk is None:  # a dueling MLP: the hidden layers, then the two streams
            trunk = Trunk(nn.Flatten(), mlp(obs_dim, hidden[:-1], hidden[-1]), hidden[-1])
            self.trunk = trunk
        self.net = nn.Linear(trunk.features, num_actions)  # the advantages when dueling
        self.value_head = nn.Linear(trunk.features, 1) if dueling else None

    def forward(self, obs: Any) -> torch.Tensor:
        if self.trunk is None:
            return self.net(obs.flatten(1).float())
        features = self.trunk(obs)
        out = self.net(features)
        if self.value_head is None:
            return out
        return self.value_head(features) + out - out.mean(dim=1, keepdim=True)

    @torch.no_grad()
    def greedy(self, obs: Observations, mask: np.ndarray | None = None) -> np.ndarray:
        """Greedy actions for a batch of observations (numpy in, numpy out); with a
        `mask` (`[B, num_actions]` bools), the best legal action."""
        device = device_of(self)
        q = self(obs_tensor(obs, device))
        if mask is not None:
            q = q.masked_fill(~torch.as_tensor(mask, device=device), -torch.inf)
        return q.argmax(dim=1).cpu().numpy()

    def act(
        self,
        obs: Observations,
        state: State,
        first: np.ndarray,
        mode: Mode,
        draws: Draws,
        mask: np.ndarray | None = None,
    ) -> Acted:
        """The policy protocol (`models.acting`): greedy actions; `sampled`, each
        replaced by a uniform one with probability `draws.epsilon` (uniform among
        the legal actions, given a `mask`)."""
        del first
        actions = self.greedy(obs, mask)
        if mode == "sampled":
            actions = epsilon_greedy(actions, self.num_actions, draws, mask)
        return Acted(actions, state)


def epsilon_greedy(
    greedy: np.ndarray, num_actions: int, draws: Draws, mask: np.ndarray | None = None
) -> np.ndarray:
    """`greedy` actions, each replaced by a uniform one (among the legal ones, given a
    `mask`) with probability `draws.epsilon`, drawn from `draws.rng`: one coin per
    action, then the uniform actions of those that came up (a Q-network's sampled
    actions; a population's, agent by agent)."""
    explore = draws.numpy.random(len(greedy)) < draws.epsilon
    count = int(explore.sum())
    if mask is None:
        greedy[explore] = draws.numpy.integers(0, num_actions, size=count)
    elif count:
        greedy[explore] = uniform_legal(mask[explore], draws.numpy)
    return greedy


def uniform_legal(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row of `mask` (`[N, A]` bools, each row allowing one or more),
    uniform among that row's legal actions: the k-th legal one, k drawn below the
    row's count."""
    k = rng.integers(0, mask.sum(axis=1))
    return (np.cumsum(mask, axis=1) > k[:, None]).argmax(axis=1)


class Trunk(nn.Module):
    """Observations in, `features` floats per observation out: `prep` (dtype,
    scale, layout) then `body`, ending in a ReLU. The shared part of the image
    networks (`models.cnn`) and of a dueling MLP."""

    def __init__(self, prep: nn.Module, body: nn.Module, features: int) -> None:
        super().__init__()
        self.prep, self.body, self.features = prep, body, features
        self.out = nn.ReLU()

    def forward(self, obs: Any) -> torch.Tensor:
        return self.out(self.body(self.prep(obs).float()))


class Encoder(nn.Module):
    """What reads observations that are not one flat vector (Dict, Tuple and discrete
    ones: `models.multi`) into `features` floats per observation, for heads that take a
    flat vector. `normalized` of those features are the ones observation
    normalisation applies to; `forward(obs, normalize)` applies `normalize` to them,
    and `vector_part(obs)` gives them from a numpy batch, for the statistics."""

    features: int
    normalized: int

    def forward(
        self, obs: Any, normalize: Callable[[torch.Tensor], torch.Tensor] | None = None
    ) -> torch.Tensor:
        raise NotImplementedError

    def vector_part(self, obs: Any) -> np.ndarray:
        raise NotImplementedError

    def describe(self) -> str:
        """What reads what, for the start-up line."""
        raise NotImplementedError


@torch.no_grad()
def weights_in_out(module: nn.Module) -> nn.Module:
    """Store every linear layer's weight as an (in, out) array in memory, its shape
    and values unchanged (a transposed view; the kernel layout Flax uses): `x @ W.T`
    then multiplies operands as they lie instead of through a transposed one. The
    math is the same. With MKL on an x86 CPU the image trunks' wide-to-narrow hidden
    layers run faster so (`python -m benchmarks learner`, its row-major rows); square
    and small MLP layers gain nothing, so only those layers are stored this way.
    Parameters keep the layout through `.to()`, `deepcopy`, `load_state_dict`,
    checkpoints and `pararl.optim`'s flat vectors. Returns `module`."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear) and layer.weight.is_contiguous():
            layer.weight.data = layer.weight.data.t().contiguous().t()
    return module


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def _orthogonal(module: nn.Module, out_gain: float) -> None:
    """Orthogonal weights and zero biases (linear and convolution layers): gain sqrt(2)
    for hidden layers (tanh/ReLU), `out_gain` for the last layer. A policy head at 0.01
    starts near-uniform, so early updates are not spent undoing a random preference
    (Engstrom et al. 2020, "Implementation Matters in Deep Policy Gradients"). Computed
    on one thread, so one seed gives one set of weights whatever the process's torch
    thread count."""
    linears = [m for m in module.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    with torch_threads(1):  # the QR inside gives other weights on other thread counts
        for i, layer in enumerate(linears):
            gain = out_gain if i == len(linears) - 1 else math.sqrt(2)
            nn.init.orthogonal_(layer.weight, gain=gain)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)


class Inputs(NamedTuple):
    """What the actor's and the critic's heads read of a batch: the same features, or
    each its own core's outputs (a critic with a core of its own)."""

    actor: torch.Tensor
    critic: torch.Tensor


class ActorCritic(FeedForward, nn.Module):
    """Policy and value MLPs (separate by default, or one shared body) for PPO; or,
    given a `trunk` (an image network, `models.cnn`), one shared trunk with a linear
    policy head and a linear value head. Given an `encoder` (Dict and Tuple
    observations: `models.multi`), the MLPs read its features, and the encoder is
    shared by the two (as SB3's on-policy `MultiInputPolicy`); `obs_dim` is then
    unused.

    The actor's outputs become actions through an action head (`models.heads`): a
    Categorical for Discrete actions, one per dimension for MultiDiscrete, a
    Bernoulli per dimension for MultiBinary, a diagonal Gaussian with a
    state-independent learned log standard deviation (`log_std`) for Box actions.
    `head` defaults to the Categorical (`discrete`) or the Gaussian of `action_dim`
    outputs. Observations pass through `norm` (a `Normalizer`, the identity unless
    asked); a trunk takes them as they come (images are never normalised, only
    scaled by the trunk). An action mask (`mask`, where a head takes one) keeps the
    policy to the legal actions in acting and in the loss alike.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        discrete: bool,
        hidden: Sequence[int] = (64, 64),
        shared: bool = False,
        orthogonal_init: bool = True,
        norm: NormSettings = OFF,
        trunk: Trunk | None = None,
        encoder: Encoder | None = None,
        head: ActionHead | None = None,
        core: CoreSettings | None = None,
    ) -> None:
        super().__init__()
        self.head = default_head(action_dim, discrete) if head is None else head
        if self.head.logits != action_dim or self.head.discrete != discrete:
            raise ValueError(
                f"action_dim {action_dim} and discrete={discrete} do not describe the "
                f"head {type(self.head).__name__} of {self.head.logits} outputs"
            )
        if encoder is not None:
            obs_dim = encoder.features
        self.obs_dim, self.action_dim, self.discrete = obs_dim, action_dim, discrete
        # a recurrent core reads the observations (normalised, or the encoder's or the
        # image trunk's features); the heads (MLPs, or linear under a trunk) read it
        self.core: RecurrentCore | None = None
        self.critic_core: RecurrentCore | None = None  # the critic's own (`core.critic`)
        if core is not None:
            self.core = RecurrentCore(obs_dim if trunk is None else trunk.features, core)
            if core.critic:
                self.critic_core = RecurrentCore(self.core.rnn.input_size, core)
            if trunk is None:
                obs_dim = core.size
        self.hidden, self.shared = tuple(hidden), shared or trunk is not None
        self.image = trunk is not None
        if self.image and norm.obs:
            raise ValueError("image trunks take raw observations: no observation normalisation")
        self.encoder = encoder
        normalized = encoder.normalized if encoder is not None else self.obs_dim
        self.norm = Normalizer(0 if self.image else normalized, norm)
        if trunk is not None:
            self.body: nn.Module = trunk
            features = trunk.features if self.core is None else self.core.features
            self.actor: nn.Module = nn.Linear(features, action_dim)
            self.critic: nn.Module = nn.Linear(features, 1)
        elif shared:
            self.body = mlp(obs_dim, hidden[:-1], hidden[-1], Tanh)
            self.actor = nn.Sequential(Tanh(), nn.Linear(hidden[-1], action_dim))
            self.critic = nn.Sequential(Tanh(), nn.Linear(hidden[-1], 1))
        else:
            self.body = nn.Identity()
            self.actor = mlp(obs_dim, hidden, action_dim, Tanh)
            self.critic = mlp(obs_dim, hidden, 1, Tanh)
        self.log_std = nn.Parameter(torch.zeros(action_dim), requires_grad=not discrete)
        if orthogonal_init:
            if encoder is not None:
                _orthogonal(encoder, math.sqrt(2))
            _orthogonal(self.body, math.sqrt(2))
            _orthogonal(self.actor, 0.01)
            _orthogonal(self.critic, 1.0)

    def _features(self, obs: Any) -> torch.Tensor:
        """What the heads read from a batch of observations (a feed-forward model)."""
        if self.encoder is not None:
            return self.body(self.encoder(obs, self.norm.observe))
        return self.body(obs if self.image else self.norm.observe(obs))

    def _core_input(self, obs: Any) -> torch.Tensor:
        """What a recurrent core reads: the encoder's features, the trunk's, or the
        normalised observations."""
        if self.encoder is not None:
            return self.encoder(obs, self.norm.observe)
        return self.body(obs) if self.image else self.norm.observe(obs)

    def _heads_input(self, core_out: torch.Tensor) -> torch.Tensor:
        return core_out if self.image else self.body(core_out)

    def _step(self, obs: Any, state: State, first: Any) -> tuple[Inputs, State]:
        """The heads' inputs for one step of a batch of envs, and the next state (a
        feed-forward model: its features, the state as given)."""
        if self.core is None:
            features = self._features(obs)
            return Inputs(features, features), state
        x = self._core_input(obs)
        if state is None:
            state = self.initial_state(len(x))
        first = torch.as_tensor(first, device=x.device)
        state = torch.as_tensor(state, device=x.device)
        rows = self.core.rows
        out, mine = self.core.step(x, state[:, :rows], first)
        if self.critic_core is None:
            features = self._heads_input(out)
            return Inputs(features, features), mine
        value_out, critics = self.critic_core.step(x, state[:, rows:], first)
        inputs = Inputs(self._heads_input(out), self._heads_input(value_out))
        return inputs, torch.cat([mine, critics], 1)

    def _replayed(self, obs: Any, sequences: Sequences | None) -> Inputs:
        """The heads' inputs for a minibatch's rows: replayed as sequences through the
        core (`sequences`), or row by row for a feed-forward model."""
        if self.core is None:
            features = self._features(obs)
            return Inputs(features, features)
        if sequences is None:
            raise ValueError("a recurrent model evaluates sequences: give `sequences`")
        x = self._core_input(obs)
        steps = sequences.steps_first()
        x = x.reshape(*steps.shape, -1)
        rows = self.core.rows

        def replay(core: RecurrentCore, start: torch.Tensor) -> torch.Tensor:
            return self._heads_input(core.sequence(x, start, steps).reshape(steps.numel(), -1))

        actor = replay(self.core, sequences.start[:, :rows])
        if self.critic_core is None:
            return Inputs(actor, actor)
        return Inputs(actor, replay(self.critic_core, sequences.start[:, rows:]))

    @property
    def recurrent(self) -> bool:
        return self.core is not None

    @property
    def state_shape(self) -> tuple[int, ...]:
        """One env's state, (S, H), a critic core's rows after the actor's; () for a
        feed-forward model."""
        if self.core is None:
            return ()
        return (self.core.rows * (2 if self.critic_core is not None else 1), self.core.features)

    def initial_state(self, batch: int) -> State:
        """A recurrent model's zero states `[B, S, H]` on its device (None: feed-forward)."""
        if self.core is None:
            return None
        return torch.zeros(batch, *self.state_shape, device=device_of(self))

    def update_norm(self, obs: Any, discounted_returns: np.ndarray) -> None:
        """Merge one rollout's raw observations (numpy) and discounted returns into
        the normalisation statistics: of the encoder's vector leaves, if it has one."""
        seen = self.encoder.vector_part(obs) if self.encoder is not None else obs
        self.norm.update(seen, discounted_returns)

    def value(
        self, obs: Any, state: State = None, first: Any = None, envs: np.ndarray | None = None
    ) -> torch.Tensor:
        """State values of a batch of observations; a recurrent model's, stepped from
        `state` (None: episodes' starts), reset where `first`. `envs`: the envs the
        rows come from (a population's agents differ by env; one network: unused)."""
        if self.core is None:
            return self.critic(self._features(obs)).squeeze(-1)
        if first is None:
            first = torch.zeros(batch_size(obs), dtype=torch.bool)
        return self.critic(self._step(obs, state, first)[0].critic).squeeze(-1)

    def distribution(self, features: torch.Tensor) -> torch.distributions.Distribution:
        return self.head.distribution(self.actor(features), self.log_std)

    def act_tensors(
        self, obs: Any, deterministic: bool = False, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actions, their log-probabilities and the state values (a recurrent model's
        from episodes' starts)."""
        inputs = self._step(obs, None, torch.ones(batch_size(obs), dtype=torch.bool))[0]
        value = self.critic(inputs.critic).squeeze(-1)
        out = self.actor(inputs.actor)
        if deterministic:
            action = self.head.greedy(out, mask)
            return action, self.head.evaluate(out, self.log_std, action, mask)[0], value
        action, log_prob = self.head.sample(out, self.log_std, None, mask)
        return action, log_prob, value

    def evaluate(
        self,
        obs: Any,
        actions: torch.Tensor,
        mask: torch.Tensor | None = None,
        sequences: Sequences | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probabilities of `actions`, entropies and values (for the PPO loss); a
        recurrent model's rows are `sequences` it replays."""
        inputs = self._replayed(obs, sequences)
        value = self.critic(inputs.critic).squeeze(-1)
        actor = self.actor(inputs.actor)
        log_prob, entropy = self.head.evaluate(actor, self.log_std, actions, mask)
        return log_prob, entropy, value

    @torch.no_grad()
    def greedy(self, obs: Observations, mask: np.ndarray | None = None) -> np.ndarray:
        """Deterministic actions (argmax / mean) for a batch of observations (a
        recurrent model's at its episodes' starts: `act` carries a state)."""
        return self.act(obs, None, np.ones(batch_size(obs), bool), "greedy", Draws(), mask).action

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
        """The policy protocol (`models.acting`). `greedy`: the actor alone. `sampled`:
        from `draws.generator`, with the log-probabilities and the state values a
        rollout stores; without a generator, from torch's global stream on the
        network's device, as a seeded training rollout (and SB3) draws."""
        device = device_of(self)
        tensor = obs_tensor(obs, device)
        inputs, state = self._step(tensor, state, first)
        if mode == "greedy":  # the actor alone: no values, no log-probabilities
            greedy = self.head.greedy(self.actor(inputs.actor), acting_mask(mask, device))
            return Acted(greedy.cpu().numpy(), state)
        if draws.generator is None:
            out = self.actor(inputs.actor)
            action, logprob = self.head.sample(out, self.log_std, None, acting_mask(mask, device))
            value = self.critic(inputs.critic).squeeze(-1)
            return Acted(action.cpu().numpy(), state, logprob.cpu().numpy(), value.cpu().numpy())
        out = self.actor(inputs.actor).cpu()  # drawn on the CPU, where the generator is
        log_std = self.log_std.detach().cpu()
        cpu = torch.device("cpu")
        action, logprob = self.head.sample(out, log_std, draws.generator, acting_mask(mask, cpu))
        value = self.critic(inputs.critic).squeeze(-1).cpu()
        return Acted(action.numpy(), state, logprob.numpy(), value.numpy())
