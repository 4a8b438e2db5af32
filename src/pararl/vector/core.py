"""The vector-env front end shared by the serial twin and the parallel env.

It speaks Gymnasium's `VectorEnv` API (plus `AsyncVectorEnv`'s `*_async`/`*_wait`
calls and EnvPool-style partial `send`/`recv`) and turns every call into commands
for the env batches behind a `Transport`. Which envs are in flight is tracked per
worker (`inflight`), so partial stepping and full steps share one code path. The
batch's layout comes from `layout`, Gymnasium's call rules and errors from
`protocol`, how actions travel from `actions`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_differing_spaces, batch_space

from pararl.mp.procs import CLOSE_GRACE_S
from pararl.mp.shared import ArraySpec
from pararl.vector.actions import step_payload
from pararl.vector.batch import fill_final_obs
from pararl.vector.errors import AlreadyPendingCallError, WorkerError
from pararl.vector.frame_ring import stack_spec
from pararl.vector.inflight import Commands, Reply, returned_rows
from pararl.vector.infos import unpack_infos
from pararl.vector.layout import (
    ObservationMode,
    SharedMemory,
    batch_specs,
    observation_spaces,
    space_check_error,
    uses_shared_memory,
)
from pararl.vector.protocol import (
    ENDS,
    attr_values,
    closed_error,
    expand_seeds,
    log_worker_error,
    require,
    reset_mask_ids,
)
from pararl.vector.spaces import (
    checked_ids,
    deliver,
    take_rows,
    unshared_leaves,
    view_rows,
)
from pararl.vector.transport import Transport
from pararl.vector.worker import BatchLayout, WithObservations, observation_tree


class BatchVectorEnv(gym.vector.VectorEnv):
    """Front end over a transport; subclasses only choose the transport.

    `shared_memory`: True (Gymnasium's default) puts observations in shared memory
    and refuses a space that cannot live there, with Gymnasium's error; False
    sends every observation pickled, as Gymnasium does; "auto" keeps the leaves
    that fit in shared memory and pickles only the others (Text, Graph, ...).
    `observation_mode`: Gymnasium's "same", "different" (spaces that differ in
    bounds, batched with `batch_differing_spaces`) or a `(batched, single)` pair.
    `shared_infos`: info keys whose values every env gives at every reset and step,
    each an array of one shape and dtype, by an example value (an env's action mask,
    `pararl.envs.masks`): they travel in shared memory, each env's in its row, and
    come back as Gymnasium batches any info (`infos[key]` of every env returned,
    `infos["_" + key]` all True), pickling nothing.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        shared_memory: SharedMemory = True,
        copy: bool = True,
        observation_mode: ObservationMode = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        worker_timeout: float | None = 300.0,
        shared_infos: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        self.closed = True  # until the transport is up: __del__ and close() are safe
        env_fns = list(env_fns)
        if not env_fns:
            raise ValueError("env_fns is empty: pass at least one env factory")
        self.env_fns = env_fns
        self.num_envs = n = len(env_fns)
        self.shared_memory = shared_memory
        self.copy = copy
        self.observation_mode = observation_mode
        self.worker_timeout = worker_timeout
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        dummy = env_fns[0]()
        self.metadata = {**dummy.metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = dummy.render_mode
        self.spec = None
        self.single_action_space = dummy.action_space
        self.action_space = batch_space(self.single_action_space, n)
        self.single_observation_space, self.observation_space = observation_spaces(
            observation_mode, dummy.observation_space, n
        )
        obs_space, act_space = self._spaces()
        share = uses_shared_memory(shared_memory, obs_space, type(self).__name__)
        stack = stack_spec(dummy) if share and observation_mode == "same" else None
        dummy.close()
        infos = dict(shared_infos or {})
        specs = batch_specs(obs_space, act_space, n, share, self.autoreset_mode, stack, infos)
        layout = BatchLayout(obs_space, act_space, self.autoreset_mode, n, stack, tuple(infos))
        self._transport = self._make_transport(env_fns, specs, layout)
        named = self._transport.arrays
        holders = unshared_leaves(obs_space, n, "obs", named, local=True)
        self._obs = observation_tree(layout, {**named, **holders})
        self._obs_unshared = list(holders.values())  # the order workers send them in
        self._shared_actions = named.get("act")
        self._rewards, self._terms, self._truncs = named["rew"], named["term"], named["trunc"]
        self._final = named.get("final")
        self._shared_infos = {key: named[f"info.{key}"] for key in infos}
        self._commands = Commands(self._transport, n)
        self._all_ids = np.arange(n)
        self._state = "default"
        self.closed = False
        try:
            self._check_spaces()
        except BaseException:
            self.close(terminate=True)
            raise
        self._commands.reply_seconds[:] = np.nan  # from the caller's first command on

    def _check_spaces(self) -> None:
        """Every env's spaces against the vector env's, as Gymnasium checks them;
        "different" observation spaces are batched from what the envs report."""
        mode = self.observation_mode
        if mode == "different":
            self.observation_space = batch_differing_spaces(
                list(self.get_attr("observation_space"))
            )
        check = ("same" if mode == "same" else "equivalent", *self._spaces())
        results = self._sync("check_spaces", self._all_ids, lambda local, rows: check)
        error = space_check_error(results, mode, self.single_action_space, type(self).__name__)
        if error is not None:
            raise error

    def _spaces(self) -> tuple[gym.Space, gym.Space]:
        return self.single_observation_space, self.single_action_space

    def _make_transport(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        specs: dict[str, ArraySpec],
        layout: BatchLayout,
    ) -> Transport:
        raise NotImplementedError

    @property
    def num_workers(self) -> int:
        return len(self._transport.slices)

    # --- commands out, replies in --------------------------------------------------

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Any worker failure takes the whole env down before it is re-raised."""
        if self.closed:
            raise closed_error(type(self).__name__)
        try:
            yield
        except (WorkerError, KeyboardInterrupt) as exc:
            if isinstance(exc, WorkerError):
                log_worker_error(exc)
            self._state = "default"  # the failed call is over, as in Gymnasium
            self.close(terminate=True)
            raise

    def _require(self, state: str, call: str) -> None:
        require(self._state, state, call)

    def _submit(
        self, command: str, ids: np.ndarray, data: Callable[[list[int] | None, np.ndarray], Any]
    ) -> None:
        self._commands.submit(command, ids, data)

    def _wait_all(self, timeout: float | None = None) -> list[Reply]:
        call = ENDS.get(self._state, "recv")
        return self._commands.wait_all(self.worker_timeout, call, timeout)

    def _results(
        self, replies: list[Reply], full: bool
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any], np.ndarray]:
        sel: np.ndarray | slice | None
        ids, sel = (self._all_ids, None) if full else returned_rows(replies)
        infos: dict[str, Any] = {}
        if len(replies) > 1:
            replies = sorted(replies, key=lambda r: int(r[0][0]))
        for command_ids, packed in replies:
            if type(packed) is WithObservations:
                deliver(self._obs_unshared, command_ids, packed.observations)
                packed = packed.infos
            if packed is not None:
                at = command_ids if full else np.searchsorted(ids, command_ids)
                unpack_infos(infos, packed, at, ids.size)
        fill_final_obs(infos, self._final, ids)
        for key, column in self._shared_infos.items():
            infos[key], infos[f"_{key}"] = take_rows(column, sel), np.ones(ids.size, bool)
        obs = view_rows(self._obs) if full and not self.copy else take_rows(self._obs, sel)
        return (
            obs,
            take_rows(self._rewards, sel),
            take_rows(self._terms, sel),
            take_rows(self._truncs, sel),
            infos,
            ids,
        )

    # --- Gymnasium API: reset / step ---------------------------------------------

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(
        self, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        with self._guard():
            seeds = expand_seeds(seed, self.num_envs)
            self._require("default", "reset_async")
            ids, options = reset_mask_ids(options, self.num_envs)
            self._submit(
                "reset", ids, lambda local, rows: (local, [seeds[r] for r in rows], options)
            )
            self._state = "reset"

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        with self._guard():
            self._require("reset", "reset_wait")
            replies = self._wait_all(timeout)
            self._state = "default"
            obs, _, _, _, infos, _ = self._results(replies, full=True)
            return obs, infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        with self._guard():
            self._require("default", "step_async")
            payload = step_payload(
                self._shared_actions, self.action_space, actions, None, self.num_envs
            )
            self._submit("step", self._all_ids, payload)
            self._state = "step"

    def step_wait(
        self, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        with self._guard():
            self._require("step", "step_wait")
            replies = self._wait_all(timeout)
            self._state = "default"
            return self._results(replies, full=True)[:5]

    # --- partial stepping (EnvPool's send + recv) ---------------

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray | None = None) -> None:
        """Step envs `env_ids` (all when None) with `actions`, batched in that order.

        Returns at once; `recv` returns the results. An env must not be in flight.
        """
        with self._guard():
            if self._state not in ("default", "partial"):
                self._require("default", "send")
            ids, ordered = checked_ids(env_ids, self.num_envs)
            if self._commands.in_flight[ids].any():
                busy = ids[self._commands.in_flight[ids]].tolist()
                raise AlreadyPendingCallError(
                    f"envs {busy} are still stepping; recv() their results before sending "
                    "them new actions",
                    "partial",
                )
            payload = step_payload(
                self._shared_actions,
                self.action_space,
                actions,
                None if env_ids is None else ids,
                self.num_envs,
            )
            self._submit("step", ordered, payload)
            self._state = "partial"

    def recv(
        self, min_envs: int | None = None, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any], np.ndarray]:
        """Results of envs sent with `send`, with their `env_ids` (ascending).

        Policies: both None -> wait for every env in flight; `min_envs=k` -> return
        once at least k envs are back; `timeout=t` -> block for the first worker, then
        also take those that finish within t seconds (with `min_envs` too: whichever
        comes first).
        Returns `(obs, rewards, terminations, truncations, infos, env_ids)`.
        """
        with self._guard():
            self._require("partial", "recv")
            if timeout is not None:
                replies = self._commands.wait_window(self.worker_timeout, timeout, min_envs)
            elif min_envs is not None:
                replies = self._commands.wait_envs(self.worker_timeout, min_envs)
            else:
                replies = self._wait_all()
            if not self._commands.in_flight.any():
                self._state = "default"
            return self._results(replies, full=False)

    @property
    def in_flight(self) -> np.ndarray:
        """Which envs are stepping now (sent, not yet returned by `recv`)."""
        return self._commands.in_flight.copy()

    @property
    def reply_seconds(self) -> np.ndarray:
        """Per worker: seconds from the start of its latest answered command to the
        arrival of the answer (NaN before its first). After a wait-for-all `recv` these
        are the workers' step times of that round, measured while the caller waited."""
        return self._commands.reply_seconds.copy()

    # --- calls, attributes, tasks, seeds ---------------------------------------------

    def call_async(self, name: str, /, *args: Any, **kwargs: Any) -> None:
        with self._guard():
            self._require("default", "call_async")
            self._submit("call", self._all_ids, lambda local, rows: (name, args, kwargs))
            self._state = "call"

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        with self._guard():
            self._require("call", "call_wait")
            replies = self._wait_all(timeout)
            self._state = "default"
            return self._ordered(replies)

    def call(self, name: str, /, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        listed = attr_values(values, self.num_envs)
        self._sync("set_attr", self._all_ids, lambda local, rows: (name, [listed[r] for r in rows]))

    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """The seeds of the sub-envs' random generators (Gymnasium's tuple)."""
        return self.get_attr("np_random_seed")

    @property  # type: ignore[misc]
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Copies of the sub-envs' random generators (drawing from them does not
        advance the envs' own)."""
        return self.get_attr("np_random")

    def call_each(
        self, name: str, args: Sequence[Any], env_ids: Sequence[int] | np.ndarray | None = None
    ) -> tuple[Any, ...]:
        """Call method `name` on each env in `env_ids` (all when None) with its own argument."""
        ids, order = checked_ids(env_ids, self.num_envs)
        if len(args) != ids.size:
            raise ValueError(f"got {len(args)} arguments for {ids.size} envs")
        arg_of = {int(e): a for e, a in zip(ids, args, strict=True)}

        def payload(local: list[int] | None, rows: np.ndarray) -> Any:
            local_ids = local if local is not None else list(range(rows.size))
            return name, local_ids, [arg_of[int(r)] for r in rows]

        by_env = dict(zip(order.tolist(), self._sync("call_each", order, payload), strict=True))
        return tuple(by_env[int(e)] for e in ids)

    def reset_task(
        self, tasks: Sequence[Any], env_ids: Sequence[int] | np.ndarray | None = None
    ) -> None:
        """Meta-RL: give env `env_ids[i]` the task `tasks[i]` (its `reset_task(task)`)."""
        self.call_each("reset_task", tasks, env_ids)

    def render(self) -> tuple[Any, ...] | None:
        return self.call("render")

    def _sync(
        self, command: str, ids: np.ndarray, data: Callable[[list[int] | None, np.ndarray], Any]
    ) -> tuple[Any, ...]:
        with self._guard():
            self._require("default", command)
            self._submit(command, ids, data)
            return self._ordered(self._wait_all())

    @staticmethod
    def _ordered(replies: list[Reply]) -> tuple[Any, ...]:
        replies = sorted(replies, key=lambda r: int(r[0][0]))
        return tuple(item for _, payload in replies for item in (payload or []))

    # --- shutdown ------------------------------------------------------------------

    def close_extras(
        self, timeout: float | None = None, terminate: bool = False, **kwargs: Any
    ) -> None:
        """Stop the workers: ask, wait up to `timeout` s (default 2), then kill."""
        if self._state not in ("default", "closed"):
            gym.logger.warn(
                f"Calling `close` while waiting for a pending call to `{self._state}` to complete."
            )
        grace = 0.0 if terminate else (CLOSE_GRACE_S if timeout is None else timeout)
        self._transport.close(grace)
        self._state = "closed"

    def __del__(self) -> None:
        # Not getattr: gym's VectorEnv has a class attribute `closed = False`, so a
        # subclass constructor that raised before ours ran would "close" no transport.
        if not self.__dict__.get("closed", True):
            self.close(terminate=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.num_envs}, num_workers={self.num_workers})"
