#!/usr/bin/env bash
# Gymnasium's own vector-env tests, with AsyncVectorEnv replaced by pararl's
# ParallelVectorEnv. Gymnasium's tests are not in its PyPI package: pass a checkout of
# the Gymnasium repository at the version installed here (gymnasium.__version__).
#   compat/gymnasium-vector-tests.sh PATH/TO/Gymnasium [pytest options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-$here/../.venv/bin/python}
[ -d "${1:-}/tests/vector" ] || { echo "usage: $0 GYMNASIUM_CHECKOUT [pytest options]" >&2; exit 2; }
cd "$1"; shift
PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m pytest -p pararl_as_async \
  -p no:cacheprovider --timeout 60 -q \
  tests/vector/test_async_vector_env.py tests/vector/test_vector_env_info.py \
  tests/vector/test_autoreset_mode.py tests/vector/test_observation_mode.py \
  tests/vector/test_vector_env.py tests/envs/registration/test_make_vec.py \
  tests/wrappers/vector/test_vectorize_transform.py "$@"
