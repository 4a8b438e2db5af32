"""Suite-wide set-up."""

import os
import signal
import tempfile

# Tests send Ctrl-C (SIGINT) to processes they start. A shell that runs the suite as
# a background job starts it with SIGINT ignored; children inherit that, and Python
# then never raises KeyboardInterrupt in them. Take SIGINT back before any test runs
# (an exec resets a handler, not an ignore, so children get the default again).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Measurements pararl caches per machine (`runners.ppo_mode`) go to a scratch
# directory, not the user's cache.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="pararl-test-cache-")
