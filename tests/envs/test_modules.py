"""`module:EnvId` modules: found on the path, in the working directory or where the
run found them; a missing or broken module is one line that says what to do."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pararl.envs.make import env_factory
from pararl.envs.modules import added_paths, import_env_module, module_dir, split_env_id
from pararl.errors import UsageError
from tests.conftest import UserModule


def test_split_env_id() -> None:
    assert split_env_id("pkg.mod:Env-v0") == ("pkg.mod", "Env-v0")
    assert split_env_id("ALE/Pong-v5") == (None, "ALE/Pong-v5")


def test_imported_from_the_working_directory_and_carried_to_factories(
    user_module: UserModule,
) -> None:
    home = str(user_module.directory)
    assert home not in sys.path  # as for the `pararl` console script
    import_env_module("corridor_env", user_module.env_id)
    assert added_paths() == (home,)
    assert sys.path[-1] == home  # appended: never shadows an installed package
    assert module_dir("corridor_env") == user_module.directory.resolve()
    assert env_factory(user_module.env_id).args[-1] == (home,)  # for spawned processes


def test_imported_from_where_the_run_found_it(user_module: UserModule, tmp_path: Path) -> None:
    os.chdir(tmp_path)  # the fixture restores the working directory
    import_env_module("corridor_env", user_module.env_id, [user_module.directory])
    assert added_paths() == (str(user_module.directory),)


def test_a_missing_module_says_what_to_put_on_pythonpath(
    user_module: UserModule, tmp_path: Path
) -> None:
    os.chdir(tmp_path)
    with pytest.raises(UsageError) as raised:
        import_env_module("corridor_env", user_module.env_id)
    message = str(raised.value)
    assert "PYTHONPATH" in message
    assert "\n" not in message
    with pytest.raises(UsageError, match=f"PYTHONPATH={tmp_path / 'gone'} "):
        import_env_module("corridor_env", user_module.env_id, [tmp_path / "gone"])
    assert added_paths() == ()
    assert str(tmp_path) not in sys.path  # a directory that did not help is taken off


def test_a_module_that_fails_to_import_says_where(user_module: UserModule) -> None:
    (user_module.directory / "broken_env.py").write_text("import os\n\nraise_here = 1 / 0\n")
    try:
        with pytest.raises(UsageError, match=r"broken_env.py:3\): ZeroDivisionError"):
            import_env_module("broken_env", "broken_env:Broken-v0")
    finally:
        sys.modules.pop("broken_env", None)
