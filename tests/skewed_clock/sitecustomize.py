"""Puts a worker subprocess on a wall clock that is ``AWA_TEST_CLOCK_SKEW_S`` seconds off, as on
a host whose clock is wrong: Python imports this module at start-up when this directory is on
``PYTHONPATH`` (``tests.processes.test_skewed_clock``). time-machine moves ``time.time()``,
``datetime.now()`` and the other wall-clock reads and lets them tick on; the monotonic clock,
which asyncio and every timeout use, is left alone, as NTP leaves it."""

import os
import time

import time_machine

time_machine.travel(time.time() + float(os.environ["AWA_TEST_CLOCK_SKEW_S"]), tick=True).start()
