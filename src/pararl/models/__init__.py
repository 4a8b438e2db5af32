"""Every network: MLP bodies, the Q-network and the actor-critic (`networks`) with
the normalisation statistics they carry (`normalize`), image trunks (`cnn`), a run's
networks built from `--model` (`build`), and the Gaussian policies of MAML and the
multi-task sampler (`gaussian`)."""

from pararl.models.build import actor_critic, q_network
from pararl.models.gaussian import GaussianMLP, TaskPolicy
from pararl.models.networks import (
    ActorCritic,
    QNetwork,
    Trunk,
    mlp,
    num_params,
)

__all__ = [
    "ActorCritic",
    "GaussianMLP",
    "QNetwork",
    "TaskPolicy",
    "Trunk",
    "actor_critic",
    "mlp",
    "num_params",
    "q_network",
]
