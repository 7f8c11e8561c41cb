"""procstart.py - when this process started, for the HTTP test clients:
the shim's rule windows (start_ms, for_ms) count from the shim's start,
just after the process's, so a client times itself from there rather than
from its first request, which Python's imports can delay by a noticeable
part of a second on a busy machine (or in the ASan build)."""
import os
import time


def since_start():
    """Seconds from the process's start (fork, in /proc/self/stat) to now."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
