"""A run's config.json, both ways: what earlier versions of pararl wrote still reads
back (resume and evaluate start from it), a file that is not one (truncated,
hand-edited, of another version) is one UsageError line that names it, and
`for_env` fills a config's defaults once, into a `Filled` the learners take."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pararl.config import (
    DQNConfig,
    MAMLConfig,
    PPOConfig,
    RunConfig,
    SACConfig,
    config_from_json,
    configs,
    saved_config,
    to_json,
)
from pararl.config.json_fields import describe, field_types
from pararl.config.saved import NOT_FIELDS
from pararl.errors import UsageError
from pararl.registry import ALGORITHMS, algorithm_of_run

# config.json as an earlier version wrote it for a DQN run: the class name, every
# field, and the facts resolved at start-up (not fields: ignored on reading)
EARLIER = {
    "algo": "DQNConfig",
    "env": "CartPole-v1",
    "seed": 3,
    "total_steps": 5000,
    "run_dir": "runs/x",
    "resume": None,
    "hidden": [64, 64],
    "lr": 0.0025,
    "mode": "async",
    "replay_ratio": 0.25,
    "resolved": {"mode": "async", "env_kind": "discrete"},
}


def test_an_earlier_config_json_reads_back(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(EARLIER))
    config = saved_config(tmp_path)
    assert isinstance(config, DQNConfig)
    assert (config.seed, config.total_steps, config.lr, config.mode) == (3, 5000, 0.0025, "async")
    assert config.hidden == (64, 64)  # JSON's list back to the field's tuple
    assert config.run_dir == Path("runs/x")
    assert algorithm_of_run(tmp_path).name == "dqn"


def changed(cls: type[RunConfig]) -> RunConfig:
    """A config of `cls` with fields of every kind away from their defaults: numbers,
    paths, an env's keyword arguments, every flag flipped, a float field given an
    int (as a hand edit writes it)."""
    values: dict[str, Any] = dict(
        seed=7, total_steps=12_345, target_return=195, run_dir=Path("runs/y"),
        env_kwargs={"size": 5, "walls": [1, 2], "name": "maze", "opts": {"x": None}},
        eval_in="inline", checkpoint_every_s=float("inf"), hidden=(3, 5), progress="plain",
    )  # fmt: skip
    for name, hint in field_types(cls).items():
        # --trust-checkpoint goes with --resume only, --recurrent-critic with --recurrent
        # (`validate`): left as they are
        flag = describe(hint).startswith("true or false")
        if flag and name not in ("trust_checkpoint", "recurrent_critic"):
            values[name] = not getattr(cls(), name)
    return cls(**{k: v for k, v in values.items() if k in field_types(cls)})


@pytest.mark.parametrize("cls", list(configs().values()), ids=list(configs()))
def test_every_algorithm_round_trips(cls: type[RunConfig]) -> None:
    assert any(a.config is cls for a in ALGORITHMS.values())
    for config in (cls(), changed(cls)):
        back = config_from_json(to_json(config, {"resolved": {"x": 1}}))
        assert back == config
        assert isinstance(back.hidden, tuple)  # type: ignore[attr-defined]
    assert type(back.target_return) is float  # 195 given: a float field holds a float


def test_every_annotation_a_config_uses_is_one_config_json_holds() -> None:
    """A field of a new type fails here, not when a run's config.json is read."""
    for cls in configs().values():
        for hint in field_types(cls).values():
            assert describe(hint)


def test_a_ppo_config_with_a_removed_option_reads_back(tmp_path: Path) -> None:
    saved = {"algo": "PPOConfig", "env": "CartPole-v1", "seed": 5}
    saved |= {"double_buffer": True, "manual_grad": False}  # options since removed
    (tmp_path / "config.json").write_text(json.dumps(saved))
    config = saved_config(tmp_path)
    assert config == PPOConfig(env="CartPole-v1", seed=5)


def test_a_directory_without_a_known_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no config\.json there"):
        saved_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"algo": "NoSuchConfig"}))
    with pytest.raises(UsageError, match="no known algorithm"):
        saved_config(tmp_path)


def refusal(text: str, source: Path | None = None) -> str:
    """The one line `config_from_json` refuses `text` with."""
    with pytest.raises(UsageError) as caught:
        config_from_json(text, source)
    message = str(caught.value)
    assert len(message.splitlines()) == 1, message
    return message


def dqn(**changes: Any) -> str:
    """A DQN run's config.json (as the run wrote it) with `changes` to its keys."""
    data = json.loads(to_json(DQNConfig(env="CartPole-v1"), {"resolved": {"mode": "serial"}}))
    return json.dumps(data | changes)


@pytest.mark.parametrize(
    ("changes", "expect"),
    [
        ({"lrr": 0.1}, '"lrr" is not a field of DQNConfig; remove it, or use the pararl version'),
        ({"a": 1, "b": 2}, '"a", "b" are not fields of DQNConfig; remove them'),
        ({"total_steps": "5000"}, 'total_steps must be an integer or null, not "5000"'),
        ({"seed": True}, "seed must be an integer, not true"),  # JSON's true is not 1
        ({"seed": None}, "seed must be an integer, not null"),
        ({"seed": 10**30}, "seed must be an integer of at most 64 bits"),
        ({"seed": 1.0}, "seed must be an integer, not 1.0"),
        ({"lr": False}, "lr must be a number or null, not false"),
        ({"lr": 1e400}, "lr must be a finite number, not Infinity"),  # JSON reads inf
        ({"lr": float("nan")}, "lr must be a finite number, not NaN"),
        ({"mode": "fast"}, 'mode must be one of "auto", "serial", "sync", "async", "averaging"'),
        ({"optimizer": "sgd"}, 'optimizer must be one of "adam", "rmsprop" or null, not "sgd"'),
        ({"hidden": "64,64"}, 'hidden must be a list of integers, not "64,64"'),
        ({"hidden": [64, 6.5]}, "hidden[1] must be an integer, not 6.5"),
        ({"run_dir": ["runs", "x"]}, "run_dir must be a path (a string) or null"),
        ({"env": {"id": "CartPole-v1"}}, "env must be a string"),
        ({"env_kwargs": [1, 2]}, "env_kwargs must be a JSON object, not [1, 2]"),
        ({"env_kwargs": {"x": 1e400}}, "env_kwargs must be JSON values"),
        ({"total_steps": -5}, "--total-steps must be > 0"),  # the config's own validate
        ({"eps_start": 0.1, "eps_end": 0.5}, "need 0 <= --eps-end <= --eps-start <= 1"),
        ({"algo": "NoSuchConfig"}, 'names no known algorithm ("algo": "NoSuchConfig"; known: '),
        ({"algo": ["DQNConfig"]}, 'names no known algorithm ("algo": ["DQNConfig"]'),
    ],
)
def test_a_wrong_key_or_value_is_one_line_naming_the_file(
    changes: dict[str, Any], expect: str
) -> None:
    source = Path("runs/x/config.json")
    message = refusal(dqn(**changes), source)
    assert message.startswith(f"{source}"), message
    assert expect in message, message


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        (dqn()[:60], "is not valid JSON ("),  # truncated
        (dqn() + "}", "is not valid JSON (Extra data"),
        ("", "is empty"),
        ("[1, 2]", "holds a list, not an object of settings"),
        ('"DQNConfig"', "holds a string, not an object of settings"),
        (json.dumps({"env": "CartPole-v1"}), 'names no known algorithm (no "algo"'),
        ("1" * 5000, "holds a number too long to read"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_a_file_that_is_no_config_is_one_line(text: str, expect: str) -> None:
    message = refusal(text)
    assert message.startswith("config.json"), message
    assert expect in message, message


def test_the_values_json_writes_read_as_their_fields_hold_them() -> None:
    config = config_from_json(dqn(lr=1, target_return=1e400, run_dir="runs/z", hidden=[8]))
    assert isinstance(config, DQNConfig)
    assert (config.lr, type(config.lr)) == (1.0, float)  # a hand edit's 1 for 1.0
    assert config.target_return == math.inf  # never reached: trains the whole budget
    assert (config.run_dir, config.hidden) == (Path("runs/z"), (8,))


def test_fields_the_file_lacks_take_their_defaults() -> None:
    config = config_from_json(json.dumps({"algo": "SACConfig", "seed": 4}))
    assert config == SACConfig(seed=4)


def test_a_bad_file_in_a_run_dir_is_named_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    for text in (dqn(total_steps=-5), dqn(lrr=1), dqn()[:-3]):
        path.write_text(text)
        with pytest.raises(UsageError, match=f"^{path}"):
            saved_config(tmp_path)
        assert path.read_text() == text
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(UsageError, match="is not text"):
        saved_config(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]  # nothing written


# JSON values of every kind, the awkward ones too: huge and negative ints, floats that
# JSON reads as infinity, strings with newlines, lists and objects of them
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([0, -1, -(2**63), 2**63, 10**30, -(10**400)])
    | st.floats()
    | st.sampled_from([1e400, -1e400, 1e300, 0.5, -0.0])
    | st.text(max_size=8)
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
CLASSES = st.sampled_from(sorted(configs().values(), key=lambda c: c.__name__))


def saved(cls: type[RunConfig]) -> dict[str, Any]:
    """A valid config.json of `cls`, as a run writes it."""
    return json.loads(to_json(cls(), {"resolved": {"mode": "serial", "env_kind": "discrete"}}))


def loads_or_refuses(data: dict[str, Any]) -> RunConfig | str:
    """A config from `data` (as JSON writes it: NaN and Infinity too), or the one line
    it was refused with; any other exception fails the test."""
    text = json.dumps(data)
    try:
        config = config_from_json(text, Path("runs/x/config.json"))
    except UsageError as exc:
        message = str(exc)
        assert message.startswith("runs/x/config.json"), message
        assert len(message.splitlines()) == 1, message
        return message
    assert config_from_json(to_json(config)) == config  # what loads is a config again
    return config


@settings(max_examples=200, deadline=None)
@given(data=st.data(), cls=CLASSES, value=VALUES)
def test_any_value_in_any_field_loads_or_is_one_line(
    data: st.DataObject, cls: type[RunConfig], value: Any
) -> None:
    name = data.draw(st.sampled_from(sorted(field_types(cls))))
    loads_or_refuses(saved(cls) | {name: value})


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    cls=CLASSES,
    extra=st.dictionaries(st.text(max_size=12), VALUES, max_size=3),
)
def test_keys_dropped_or_added_load_or_are_one_line(
    data: st.DataObject, cls: type[RunConfig], extra: dict[str, Any]
) -> None:
    config = changed(cls)
    written = json.loads(to_json(config, {"resolved": {}}))
    dropped = data.draw(st.sets(st.sampled_from(sorted(written))))
    result = loads_or_refuses({k: v for k, v in written.items() if k not in dropped} | extra)
    if set(extra) - set(field_types(cls)) - set(NOT_FIELDS) - {"algo"}:
        assert isinstance(result, str), "a key that is no field was read past"
    if "algo" in dropped and "algo" not in extra:
        assert "no known algorithm" in str(result), result
    if not extra and "algo" not in dropped:
        # older versions wrote fewer fields: the ones missing take their defaults
        defaults = {name: getattr(cls(), name) for name in dropped & set(field_types(cls))}
        assert result == dataclasses.replace(config, **defaults), result


@settings(max_examples=100, deadline=None)
@given(cls=CLASSES, cut=st.floats(0.0, 1.0, exclude_max=True))
def test_a_file_cut_off_anywhere_is_one_line(cls: type[RunConfig], cut: float) -> None:
    text = to_json(cls())
    message = refusal(text[: int(cut * len(text))])
    assert "not valid JSON" in message or "is empty" in message, message


def test_for_env_fills_the_kinds_defaults_once() -> None:
    filled = DQNConfig(lr=0.5).for_env("minatar")
    assert filled.kind == "minatar"
    assert filled.config.lr == 0.5  # given: kept
    assert filled.config.optimizer == filled.defaults["optimizer"] == "rmsprop"
    assert "lr" not in filled.defaults
    assert filled.config.for_env("minatar").defaults == {}  # nothing left to fill
    assert filled.config.settings.batch_size == 32
    maml = MAMLConfig(env="pararl/Navigation2D-v0", meta_iterations=2).for_env("continuous")
    assert maml.defaults["meta_batch_size"] == 20
    assert maml.config.total_steps == 2 * maml.config.steps_per_iteration()


def test_an_env_with_its_own_defaults_takes_them_over_its_kinds() -> None:
    """SAC on Pendulum-v1 (by its id, or `module:Pendulum-v1`): rl-zoo's row for it
    first, the kind's for the rest; a given value wins over both; another env of the
    same kind gets the kind's."""
    for env in ("Pendulum-v1", "gymnasium.envs.classic_control:Pendulum-v1"):
        filled = SACConfig(env=env, learning_starts=500).for_env("continuous")
        assert filled.tuned_for == "Pendulum-v1"
        assert (filled.config.lr, filled.config.total_steps) == (1e-3, 20_000)
        assert filled.config.learning_starts == 500  # given
        assert filled.config.batch_size == 256  # the kind's
    mujoco = SACConfig(env="HalfCheetah-v5").for_env("continuous")
    assert mujoco.tuned_for is None
    assert (mujoco.config.lr, mujoco.config.learning_starts) == (3e-4, 10_000)
    given = SACConfig(env="Pendulum-v1", lr=3e-4, total_steps=10, learning_starts=1,
                      eval_every=1, checkpoint_every=1).for_env("continuous")  # fmt: skip
    assert given.tuned_for is None  # nothing of its row was used


@pytest.mark.parametrize("cls", list(configs().values()), ids=list(configs()))
def test_a_choice_made_in_python_is_checked_before_a_run_saves_it(cls: type[RunConfig]) -> None:
    """A field of a few choices given another value from Python (the command line
    refuses it itself) is one UsageError line before anything runs, not a run whose
    config.json nothing can read back; its defaults (None where a field allows it)
    pass."""
    cls().validate()
    with pytest.raises(UsageError, match=r"^--device must be one of auto, cpu, cuda, not 'gpu'$"):
        cls(device="gpu").validate()  # type: ignore[arg-type]
