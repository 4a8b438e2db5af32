"""A trained agent, loaded from a run directory: `pararl.load(run_dir)`, then
`agent.act(obs)`.

The agent is the run's policy (what its algorithm's spec loads from a checkpoint: a
Q-network, an actor-critic with its observation-normalisation statistics inside, an
actor, a Gaussian meta-policy that `adapt` turns into a task's) with the run's config.
It acts through the one acting call every policy has (`models.acting`), on one
observation or a batch of them, as the env pararl builds gives them
(`agent.make_env()`: Atari's preprocessing included), on the CPU; a policy with
memory carries its state from call to call (`reset()` starts new episodes).

A run whose env gives action masks (`envs.masks`) acts within the mask given with
each observation: `agent.act(obs, action_mask=info["action_mask"])`, the mask from
the info of the reset or step that returned `obs` (the env `make_env()` builds puts
an `action_masks()` method's mask there too).
"""

from __future__ import annotations

import operator
from dataclasses import replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pararl import checkpoint as ckpt
from pararl.config import RunConfig, saved_config
from pararl.config.env_source import EnvArg, is_factory_name
from pararl.config.saved import saved_facts
from pararl.envs.make import check_env_id, env_factory
from pararl.envs.masks import MASK_KEY, batch_mask
from pararl.envs.modules import split_env_id
from pararl.errors import UsageError
from pararl.evaluation.episodes import action_draws
from pararl.models.acting import Mode, Observations, Policy, starts
from pararl.observations import Leaf, as_batch, batch_size
from pararl.registry import Algorithm, algorithm_of
from pararl.rundir import RunDir

# `Agent.act`'s `state` when the caller gives none: the agent carries it itself
CARRIED: Any = object()


class Agent:
    """A run's trained policy. `network` is the torch module itself (its
    `state_dict` is the checkpoint's weights), which acts through the one acting
    call (`models.acting.Policy`); `config` the run's config; `source` the checkpoint
    file; `env_steps` how far the run had trained when it was saved."""

    def __init__(
        self,
        config: RunConfig,
        network: torch.nn.Module,
        state: dict[str, Any],
        source: Path,
        seed: int = 0,
    ) -> None:
        if not isinstance(network, Policy):
            raise TypeError(f"a {type(network).__name__} has no acting call (models.acting)")
        self.config, self.network, self.source = config, network.cpu().eval(), source
        self.policy: Policy = network
        self.algorithm: Algorithm = algorithm_of(config)
        self.env_steps = ckpt.Header.of(state).env_steps
        self.obs_shape = tuple(state["obs_shape"])
        self.obs_dtype = np.dtype(state.get("obs_dtype", "<f4"))
        # Dict and Tuple observations: their leaves (none: one array)
        self.obs_leaves = tuple(Leaf.from_dict(d) for d in state.get("obs_leaves", ()))
        bounds = state.get("action_bounds")
        self.action_bounds = None if bounds is None else tuple(np.asarray(b) for b in bounds)
        self.action_masks = bool(state.get("action_masks", False))  # acts within masks
        # the checkpoint's description of the network (shapes, bounds), not its weights
        self._state = {k: v for k, v in state.items() if k not in ("learner", "replay")}
        # for `act(..., deterministic=False)`: the streams `pararl evaluate` draws from
        self.draws = action_draws("sampled", seed, (0,), self.algorithm.sampled_epsilon(config))
        self.policy_state: Any = None  # what a policy with memory carries between calls
        self._first: np.ndarray | None = None  # episodes start at the next call
        self.task: Any = None  # MAML: the task this agent was adapted to (None: meta-policy)
        self.adaptation_returns: np.ndarray | None = None  # before adapting, after each step

    @property
    def env_id(self) -> str:
        """The run's env id, or the name of the factory that builds its env."""
        return self.config.env_name

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return dict(self.config.env_kwargs)

    def __repr__(self) -> str:
        return (
            f"Agent({type(self.config).__name__}, env {self.env_id!r}, "
            f"{self.env_steps:,} env steps, from {self.source})"
        )

    def make_env(self, render_mode: str | None = None) -> gym.Env:
        """The env as the run was evaluated: the same id, keyword arguments and
        preprocessing (Atari's frames), with the true reward. A `render_mode` the env's
        constructor does not take is a UsageError that says so."""
        try:
            if self.algorithm.make_env is not None:  # the algorithm's own (MAML's tasks)
                env: gym.Env = self.algorithm.make_env(self.config, render_mode)
                return env
            make = env_factory(
                self.config.env, render_mode=render_mode, kwargs=self.config.env_kwargs
            )
            return make()
        except TypeError as exc:
            if render_mode is None or "render_mode" not in str(exc):
                raise
            raise UsageError(
                f"env '{self.env_id}' does not take render_mode='{render_mode}', which "
                "a video or an on-screen play needs: give its constructor a render_mode "
                "argument and a render() that returns the frame (Gymnasium's Env API)"
            ) from exc

    def act(
        self,
        obs: Any,
        deterministic: bool = True,
        action_mask: Any = None,
        state: Any = CARRIED,
        episode_start: Any = None,
    ) -> Any:
        """The action for one observation (an int for Discrete actions, an array
        for others), or an array of actions for a batch `[N, *obs_shape]`; Dict and
        Tuple observations as the env gives them (one, or a dict or tuple of batches
        of each leaf).
        `deterministic`: the greedy action (argmax, or the Gaussian's mean); else one
        sampled from the policy (DQN: epsilon-greedy at the run's final epsilon).
        `action_mask`: the observation's action mask (a batch's: one per row), which
        a run whose env gives masks needs; the action is then a legal one.

        A policy with memory (`--recurrent`) carries its state on from the last call
        (`reset()` first at new episodes). Or the caller carries it, as SB3's
        `predict(obs, state, episode_start)`: given `state` (None at the start: new
        episodes), `act` returns `(action, state)`, the state to pass with the next
        observation; `episode_start` (one bool per row) marks the rows whose episode
        starts with this observation (their state starts anew, the carried one too)."""
        batch, single = self._as_batch(obs)
        size = batch_size(batch)
        mask = self._mask_of(action_mask, size)
        given = state is not CARRIED
        if given:
            first = starts(size) if state is None else np.zeros(size, bool)
            if episode_start is not None:
                first = first | np.asarray(episode_start, bool).reshape(size)
            current = self.policy.initial_state(size) if state is None else state
        else:
            if self._first is None or len(self._first) != size:
                self.policy_state = self.policy.initial_state(size)
                self._first = starts(size)
            current, first = self.policy_state, self._first
            if episode_start is not None:  # those rows' carried state starts anew
                first = first | np.asarray(episode_start, bool).reshape(size)
        mode: Mode = "greedy" if deterministic else "sampled"
        try:
            acted = self.policy.act(batch, current, first, mode, self.draws, mask)
        except RuntimeError as exc:
            if not (given and "hidden" in str(exc)):
                raise
            raise UsageError(
                f"state= is not the state of {size} observation(s) ({str(exc).splitlines()[0]}); "
                "pass the state act returned for a batch of this size, or None to start anew"
            ) from None
        if not given:
            self.policy_state, self._first = acted.state, np.zeros(size, bool)
        actions = acted.action
        if self.action_bounds is not None:
            actions = np.clip(actions, *self.action_bounds).astype(actions.dtype)
        result: Any = actions
        if single:
            action = actions[0]
            result = int(action) if action.ndim == 0 else action
        return (result, acted.state) if given else result

    def _mask_of(self, action_mask: Any, batch: int) -> np.ndarray | None:
        if action_mask is None:
            if self.action_masks:
                raise UsageError(
                    f"this agent was trained with {self.env_id}'s action masks: pass the "
                    "observation's, agent.act(obs, action_mask=info['action_mask']), or "
                    "action_mask=env.unwrapped.action_masks() for an env with that method"
                )
            return None
        mask = np.asarray(action_mask).astype(np.bool_).reshape(batch, -1)
        return batch_mask({MASK_KEY: mask})  # a row that allows nothing allows everything

    def reset(self) -> None:
        """New episodes start at the next `act` (a policy with memory forgets)."""
        self._first = None

    def _as_batch(self, obs: Any) -> tuple[Observations, bool]:
        if self.obs_leaves:
            return as_batch(obs, self.obs_leaves)
        array = np.asarray(obs)
        if array.dtype != self.obs_dtype:
            array = array.astype(self.obs_dtype)
        if array.shape == self.obs_shape:
            return array[None], True
        if array.ndim == len(self.obs_shape) + 1 and array.shape[1:] == self.obs_shape:
            return array, False
        raise UsageError(
            f"an observation of shape {array.shape}: this agent takes {self.obs_shape} or a "
            f"batch (N, {', '.join(map(str, self.obs_shape))}) (from {self.env_id}; "
            "agent.make_env() builds the env as it was trained)"
        )

    def adapt(self, task: Any, episodes: int | None = None, steps: int = 1, seed: int = 0) -> Agent:
        """MAML: this meta-policy adapted to `task` (one of the env's
        `sample_tasks(n)`), by `steps` inner gradient steps, each on `episodes` new
        episodes (default: the run's `--fast-batch-size`) of the policy adapted so
        far, as in training. The adapted agent acts with the task's parameters."""
        if self.algorithm.adapt is None:
            raise UsageError(
                f"adapt() is for MAML runs (meta-RL); this is a {type(self.config).__name__} run"
            )
        adapted, returns = self.algorithm.adapt(
            self.network, self.config, task, episodes, steps, seed
        )
        agent = Agent(self.config, adapted, self._state, self.source, seed)
        agent.task, agent.adaptation_returns = task, returns
        return agent


def load(
    run_dir: str | Path,
    checkpoint: str = "best",
    seed: int = 0,
    trust_checkpoint: bool = False,
    env: EnvArg | None = None,
    agent: int | None = None,
) -> Agent:
    """The agent saved in `run_dir` (a `pararl train` run directory) at `checkpoint`
    (best, final, interrupted, latest, step_N). A `module:EnvId` run imports its
    module from the Python path or the working directory (not inside the run), after
    saying which file that is; from where the run found it only with
    `trust_checkpoint`. The checkpoint is read weights-only; `trust_checkpoint` also
    unpickles one the weights-only loader refuses (a file from an earlier pararl
    version). Either runs code the run holds: only for a run you trust.
    `env`: the env the agent acts in (`make_env`, `pararl.evaluate`) instead of the
    run's, as `env=` of a config takes it; a run whose env a factory built needs its
    factory given again here (config.json holds only its name). `agent`: which of a
    run of several agents (`--seeds N`: 0 to N-1; it is loaded as the run of its
    seed alone)."""
    run = RunDir(Path(run_dir))
    if not run.config.is_file():
        raise UsageError(
            f"{run.root} is not a pararl run directory (no config.json); pass the "
            "directory pararl train saved the run in"
        )
    config = saved_config(run.root)
    if env is not None:
        config = replace(config, env=env)
        config.validate()
    if isinstance(config.env, str) and (
        split_env_id(config.env)[0] is not None or is_factory_name(config.env)
    ):
        found = saved_facts(run.root).get("env_module_dir")
        check_env_id(
            config.env, [found] if found else [], named_by=run.root, trusted=trust_checkpoint
        )
    path = run.checkpoint(checkpoint)
    if not path.is_file():
        names = sorted(p.stem for p in run.checkpoints.glob("*.pt") if p.stem != "replay")
        raise UsageError(
            f"{run.root} has no checkpoint '{checkpoint}'"
            + (f"; it has {', '.join(names)}" if names else " (no checkpoints/ yet)")
        )
    algo = algorithm_of(config)
    state = ckpt.load(path, trust_checkpoint, algo.name)
    state, config = member(state, config, agent, run.root)
    try:
        policy = algo.policy(config, state)
    except (RuntimeError, KeyError, ValueError, TypeError, IndexError) as exc:
        raise ckpt.mismatch(path, exc) from exc
    return Agent(config, policy, state, path, seed)


def member(
    state: dict[str, Any], config: Any, agent: int | None, root: Path
) -> tuple[dict[str, Any], Any]:
    """Agent `agent` of a checkpoint of several (`--seeds`), with its run's config (its
    seed, one agent), as a run of its own; a checkpoint of one agent as it is."""
    if agent is not None:
        wrong = UsageError(f"agent={agent!r}: give the agent's index as an int (0 for the first)")
        if isinstance(agent, bool):
            raise wrong
        try:
            agent = operator.index(agent)  # an int, or one of numpy's integers
        except TypeError:
            raise wrong from None
    agents = state.get("agents")
    if agents is None:
        if agent not in (None, 0):
            raise UsageError(f"{root} trained one agent; drop --agent (or give 0)")
        return state, config
    if agent is None or not 0 <= agent < len(agents):
        given = "" if agent is None else f" (not {agent})"
        raise UsageError(
            f"{root} trained {len(agents)} agents (--seeds {len(agents)}); pick one with "
            f"--agent (from Python: agent=) between 0 and {len(agents) - 1}{given}"
        )
    seed, settings = state["seeds"][agent], state.get("settings", [{}] * len(agents))[agent]
    alone = {k: v for k, v in (("seeds", 1), ("sweep", ())) if hasattr(config, k)}
    return agents[agent], replace(config, seed=seed, **alone, **settings)


__all__ = ["Agent", "load"]
