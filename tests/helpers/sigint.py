"""Children that must see Ctrl-C: a test runner started in the background (`&`, nohup, some CI
runners) ignores SIGINT, and an ignored signal stays ignored across fork and exec, so Python in
the child would install no KeyboardInterrupt handler.  The child gets the default action back
before it starts, and Python then installs its handler as in a terminal."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """preexec_fn for a subprocess that is sent SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
