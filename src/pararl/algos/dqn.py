"""DQN learner: double-DQN targets on n-step returns, Huber loss, target network.

References: Mnih et al. 2015 (DQN), van Hasselt et al. 2016 (double DQN),
Hessel et al. 2018 (n-step returns in Rainbow).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the usual name

from pararl.config import DQNConfig
from pararl.models import QNetwork
from pararl.optim import FlatAdam
from pararl.replay import Transitions


class DQNLearner:
    """Owns the online and target Q-networks and the optimizer, on one device."""

    def __init__(self, q: QNetwork, config: DQNConfig, device: torch.device) -> None:
        self.config = config
        self.device = device
        self.q = q.to(device)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self.optimizer = FlatAdam(self.q.parameters(), lr=config.lr)
        self.updates = 0

    def _tensor(self, array: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.as_tensor(array, dtype=dtype).to(self.device, non_blocking=True)

    def update(self, batch: Transitions) -> dict[str, torch.Tensor]:
        """One gradient step on a minibatch; returns loss and mean Q."""
        cfg = self.config
        obs, next_obs = self._tensor(batch.obs), self._tensor(batch.next_obs)
        actions = self._tensor(batch.action, torch.int64)
        ret = self._tensor(batch.ret, torch.float32)
        discount = self._tensor(batch.discount, torch.float32)

        with torch.no_grad():
            next_q_target = self.q_target(next_obs)
            if cfg.double_dqn:
                # the online net picks the next action, the target net values it
                next_actions = self.q(next_obs).argmax(dim=1, keepdim=True)
                next_value = next_q_target.gather(1, next_actions).squeeze(1)
            else:
                next_value = next_q_target.max(dim=1).values
            # n-step TD target; discount is gamma**k, and 0 only after termination
            td_target = ret + discount * next_value

        q_taken = self.q(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(q_taken, td_target)  # Huber

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.clip_grad_norm_(cfg.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        self._update_target()
        # tensors, not floats: converting would wait for the GPU on every update
        return {"loss": loss.detach(), "q_mean": q_taken.detach().mean()}

    @torch.no_grad()
    def _update_target(self) -> None:
        cfg = self.config
        if cfg.tau < 1.0:  # Polyak averaging every update
            for p, p_target in zip(self.q.parameters(), self.q_target.parameters(), strict=True):
                p_target.lerp_(p, cfg.tau)
        elif self.updates % cfg.target_update == 0:
            self.q_target.load_state_dict(self.q.state_dict())

    def state_dict(self) -> dict[str, Any]:
        return {
            "q": self.q.state_dict(),
            "q_target": self.q_target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.q.load_state_dict(state["q"])
        self.q_target.load_state_dict(state["q_target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
