"""The kind-dependent settings are derived from each config's own `BY_KIND` table:
every field they name is the config's, none of the run's budget or intervals; a
config not yet filled in says what to call; and every `settings.NAME` the library
reads exists in some algorithm's settings (they are typed `Any`, so this test is
what keeps a misspelt name from reaching a run)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pararl.config import RunConfig, configs
from pararl.config.kinds import settings_class
from pararl.errors import UsageError

SRC = Path(__file__).resolve().parents[2] / "src" / "pararl"


def test_settings_are_the_configs_kind_dependent_fields() -> None:
    run_fields = {name for row in RunConfig.BY_KIND.values() for name in row}
    for name, cls in configs().items():
        fields = {f.name for f in dataclasses.fields(settings_class(cls))}
        table = {key for row in cls.BY_KIND.values() for key in row}
        assert fields == table - run_fields, name
        assert fields <= {f.name for f in dataclasses.fields(cls)}, name


def test_an_unfilled_config_says_what_to_call() -> None:
    with pytest.raises(UsageError, match=r"not set; call config\.for_env\(kind\) first"):
        configs()["TD3Config"]().settings  # noqa: B018


def test_every_setting_the_library_reads_exists() -> None:
    known = {f.name for cls in configs().values() for f in dataclasses.fields(settings_class(cls))}
    read = {
        name
        for path in SRC.rglob("*.py")
        for name in re.findall(r"\bsettings\.([a-z_][a-z0-9_]*)\b", path.read_text())
    }
    # `NormSettings` (models.normalize) is another record that happens to be named so
    assert read - known <= {"obs", "reward", "clip_obs", "clip_reward"}
    assert {"lr", "batch_size", "exploration_noise", "eps_end"} <= read
