"""The seed post's multi-process DQN (seeds/000), re-implemented to be measured.

Its design, kept as it was:

- each child process owns one CartPole env (`.unwrapped`: no time limit) and acts
  epsilon-greedily (greedy with probability 0.9) with the network it was last sent,
  wrapped in a fresh `Agent` (which builds an Adam optimizer it never uses) every step;
- it rewards with the post's shaping and sends ONE transition `hstack(s, a, r, s')`
  per pipe message to the main process;
- the main process stores it in a replay memory of 2000, learns (batch 64, Adam
  lr 0.01, gamma 0.9, MSE, target net synced every 200 learn steps) every 5 stored
  transitions once the memory is full, copies the learner's weights into `net`, and
  sends the whole `net` module through the pipe again after every step. Pickling a
  module under `import torch` moves each tensor into shared memory and passes a file
  descriptor per tensor per message: that is the cost being measured.

Changes, none of which slow it down: it runs on the CPU (this machine has no GPU);
children never save the model (the post writes it to `E:\\` after every episode);
children run one torch thread; a child stops when sent `None` instead of a network
(the post's children loop forever); and the main loop is lock-step per child (below).

Why the post's literal loop deadlocks with 2 or more children: after receiving one
transition from child j it sends the net to *every* child, so each round each child
gets N nets but only one transition of each child is read. Every net lets a child
send another transition; the unread transitions and nets pile up until both pipes of
a child are full, and then the main process blocks in `send(net)` while that child
blocks in `send(data)`. Here the main process sends the net only to the child it
just heard from: every child still gets the newest net after each of its steps and
every message still carries one transition, but each pipe holds at most one message
in each direction, so nothing can fill up.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from multiprocessing.connection import Connection

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

ENV_ID = "CartPole-v1"
GREEDY = 0.9
MEMORY_CAPACITY = 2000
TARGET_SYNC = 200  # learn steps between target-network syncs
BATCH = 64
GAMMA = 0.9
LR = 0.01
LEARN_EVERY = 5  # stored transitions per learn step (once the memory is full)
STATE_DIM, NUM_ACTIONS = 4, 2
ROW = 2 * STATE_DIM + 2  # s, a, r, s'


class SeedNet(nn.Module):
    """The post's MLP: 4 -> 20 (ReLU) -> 10 (sigmoid) -> 2, weights N(0, 0.1)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_to_y1 = nn.Linear(STATE_DIM, 20)
        self.in_to_y2 = nn.Linear(20, 10)
        self.out = nn.Linear(10, NUM_ACTIONS)
        for layer in (self.in_to_y1, self.in_to_y2, self.out):
            layer.weight.data.normal_(0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sigmoid(self.in_to_y2(F.relu(self.in_to_y1(x))))
        return self.out(x)


class Agent:
    """The child's actor, rebuilt around each network received (as in the post)."""

    def __init__(self, net: nn.Module) -> None:
        self.real_net = net
        self.optimizer = torch.optim.Adam(self.real_net.parameters(), lr=LR)

    def choose_action(self, state: np.ndarray, greedy: float = GREEDY) -> int:
        if np.random.uniform() < greedy:
            q = self.real_net(torch.unsqueeze(torch.FloatTensor(state), 0))
            return int(torch.max(q, 1)[1].item())
        return int(np.random.randint(0, NUM_ACTIONS))


def shaped_reward(env: gym.Env, next_state: np.ndarray) -> float:
    """The post's CartPole shaping: position and angle terms, not the env's reward."""
    x, _, theta, _ = next_state
    base = env.unwrapped
    r1 = (base.x_threshold - abs(x)) / base.x_threshold - 0.8  # type: ignore[attr-defined]
    theta_max = base.theta_threshold_radians  # type: ignore[attr-defined]
    r2 = (theta_max - abs(theta)) / theta_max - 0.5
    return float(3 * r1 + r2)


def seed_child(pipe: Connection, seed: int) -> None:
    """One child: receive the net, act one step, send the transition; until `None`."""
    torch.set_num_threads(1)
    np.random.seed(seed)
    env = gym.make(ENV_ID).unwrapped
    s, _ = env.reset(seed=seed)
    try:
        while True:
            net = pipe.recv()
            if net is None:
                return
            agent = Agent(net.cpu())
            action = agent.choose_action(s, GREEDY)
            s_, _, terminated, truncated, _ = env.step(action)
            r = shaped_reward(env, s_)
            pipe.send(np.hstack((s, action, r, s_)))
            s = s_
            if terminated or truncated:
                s, _ = env.reset()
    finally:
        env.close()


class SeedLearner:
    """The post's `DQN` class: replay memory of 2000 rows, `learn` on random rows."""

    def __init__(self) -> None:
        self.real_net, self.target_net = SeedNet(), SeedNet()
        self.memory_counter = 0
        self.mem = np.zeros((MEMORY_CAPACITY, ROW))
        self.learn_step = 0
        self.lossfunc = nn.MSELoss()
        self.optimizer = torch.optim.Adam(self.real_net.parameters(), lr=LR)

    def store_transition(self, row: np.ndarray) -> None:
        self.mem[self.memory_counter % MEMORY_CAPACITY, :] = row
        self.memory_counter += 1

    def learn(self) -> None:
        if self.learn_step % TARGET_SYNC == 0:
            self.target_net.load_state_dict(self.real_net.state_dict())
        self.learn_step += 1
        rows = self.mem[np.random.choice(MEMORY_CAPACITY, BATCH), :]
        b_s = torch.FloatTensor(rows[:, :STATE_DIM])
        b_a = torch.LongTensor(rows[:, STATE_DIM : STATE_DIM + 1].astype(np.int64))
        b_r = torch.FloatTensor(rows[:, STATE_DIM + 1 : STATE_DIM + 2])
        b_s_ = torch.FloatTensor(rows[:, -STATE_DIM:])
        real_q = self.real_net(b_s).gather(1, b_a)
        next_q = self.target_net(b_s_).detach()
        target_q = b_r + GAMMA * next_q.max(1)[0].view(BATCH, 1)
        loss = self.lossfunc(real_q, target_q)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


def random_transitions(count: int, seed: int) -> np.ndarray:
    """Rows from a random policy with the post's shaping (to pre-fill the memory)."""
    env = gym.make(ENV_ID).unwrapped
    rng = np.random.default_rng(seed)
    rows = np.zeros((count, ROW))
    s, _ = env.reset(seed=seed)
    for i in range(count):
        a = int(rng.integers(NUM_ACTIONS))
        s_, _, terminated, _, _ = env.step(a)
        rows[i] = np.hstack((s, a, shaped_reward(env, s_), s_))
        s = s_
        if terminated:
            s, _ = env.reset()
    env.close()
    return rows


class SeedDesign:
    """The post's main process with `num_actors` children, driven for timed spells.

    With `prefill` the memory starts full of random-policy transitions, so learning
    (every 5 transitions) runs from the first measured step, as in steady state.
    """

    def __init__(self, num_actors: int, seed: int = 0, prefill: bool = True) -> None:
        self.learner = SeedLearner()
        if prefill:
            for row in random_transitions(MEMORY_CAPACITY, seed):
                self.learner.store_transition(row)
        self.net = SeedNet()
        self.net.load_state_dict(self.learner.real_net.state_dict())
        ctx = mp.get_context()
        self.pipes: list[Connection] = []
        self.procs: list[mp.process.BaseProcess] = []
        for i in range(num_actors):
            main_end, child_end = ctx.Pipe()
            proc = ctx.Process(target=seed_child, args=(child_end, seed + i), daemon=True)
            proc.start()
            child_end.close()
            self.pipes.append(main_end)
            self.procs.append(proc)
        for pipe in self.pipes:
            pipe.send(self.net)  # the first net; from now on one per received step
        self.transitions = 0

    def run_for(self, seconds: float) -> int:
        """Receive, store, learn and answer for about `seconds`; transitions taken."""
        learner, before = self.learner, self.transitions
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for pipe in self.pipes:
                learner.store_transition(pipe.recv())
                self.transitions += 1
                if (
                    learner.memory_counter > MEMORY_CAPACITY
                    and learner.memory_counter % LEARN_EVERY == 0
                ):
                    learner.learn()
                self.net.load_state_dict(learner.real_net.state_dict())
                pipe.send(self.net)  # only to this child: see the module docstring
        return self.transitions - before

    def close(self, grace: float = 2.0) -> None:
        """Take each child's pending transition, tell it to stop, reap it."""
        for pipe in self.pipes:
            with contextlib.suppress(OSError, EOFError, ValueError):
                if pipe.poll(grace):
                    pipe.recv()
                pipe.send(None)
        for proc in self.procs:
            proc.join(grace)
            if proc.is_alive():
                proc.terminate()
                proc.join(1.0)
        for pipe in self.pipes:
            pipe.close()
        self.pipes, self.procs = [], []
