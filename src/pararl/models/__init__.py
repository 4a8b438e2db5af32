"""Every network: MLP bodies, the Q-network and the actor-critic (`networks`) with
the normalisation statistics they carry (`normalize`), image trunks (`cnn`), a run's
networks built from `--model` (`build`), the Gaussian policies of MAML and the
multi-task sampler (`gaussian`), SAC's tanh-squashed Gaussian actor (`squashed`),
TD3's deterministic actor (`deterministic`), their twin Q(s, a) critics (`critics`),
the action heads that turn an actor-critic's outputs into actions of each kind of
action space, masked or not (`heads`), and the one acting call they all answer
(`acting`)."""

from pararl.models.build import actor_critic, q_network
from pararl.models.critics import TwinQ
from pararl.models.gaussian import GaussianMLP, TaskPolicy
from pararl.models.networks import (
    ActorCritic,
    QNetwork,
    Trunk,
    mlp,
    num_params,
)
from pararl.models.squashed import SquashedGaussianActor, squashed_actor

__all__ = [
    "ActorCritic",
    "GaussianMLP",
    "QNetwork",
    "SquashedGaussianActor",
    "TaskPolicy",
    "Trunk",
    "TwinQ",
    "actor_critic",
    "mlp",
    "num_params",
    "q_network",
    "squashed_actor",
]
