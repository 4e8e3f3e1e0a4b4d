"""A clock for the clients' waits in unit tests: ``clock()`` is the time, ``clock.sleep(s)`` moves it on at once
and records the wait in ``slept`` (a wait that is never reached costs no time)."""


class Clock:
    """Time ``now`` (seconds), moved on only by :meth:`sleep`; ``slept``: each wait asked for, in order."""

    def __init__(self, now=0.0):
        self.now = float(now)
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds
