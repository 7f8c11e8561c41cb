"""relay_calls.py - what the relay spends per round trip, counted with
strace: a relayed request and its answer, 64 bytes or 64 KiB, must not cost
the relay a read that fails with EAGAIN in each direction (a read of the
side that had no event, or a read on after the whole message was in), and
goes socket to pipe to socket (splice), never through the relay's buffer.
The client blocks in recv, so every EAGAIN strace sees is the relay
thread's. Also checks that every byte came back, and that bytes the app is
slow to take wait in the relay, in order. Loopback only.

usage: relay_calls.py BUILD_DIR"""
import glob
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import check  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
PY = "/usr/bin/python3"
TMP = tempfile.mkdtemp(prefix="fn-calls-")
ADDR = "127.0.0.1"
TRIPS = {64: 300, 65536: 100}

# Relayed with no delay: a bandwidth rule no transfer here reaches.
POLICY = """rules = ( { name = "relay"; action = "bandwidth"; rate = 1099511627776L;
  match = { to = "127.0.0.1/32"; port = "%d"; }; } );
"""

CLIENT = r"""
import socket, sys
port, size, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
msg, good = b"x" * size, 0
for _ in range(n):
    s.sendall(msg)
    got = b""
    while len(got) < size:
        b = s.recv(size - len(got))
        if not b:
            break
        got += b
    good += got == msg
print(good)
"""


def echo_server():
    """An echo server outside the shim that answers a millisecond after
    each read; returns its port."""
    lst = socket.socket()
    lst.bind((ADDR, 0))
    lst.listen(8)

    def serve(c):
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            time.sleep(0.001)  # the answer comes after the relay looked
            c.sendall(b)
        c.close()

    def accept():
        while True:
            c, _ = lst.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return lst.getsockname()[1]


def main():
    port = echo_server()
    conf = os.path.join(TMP, "relay.conf")
    with open(conf, "w") as f:
        f.write(POLICY % port)
    env = dict(os.environ, LD_PRELOAD=os.path.join(BUILD, "libfaultnet.so"),
               FAULTNET_CONFIG=conf)
    for t in checks.selected([lambda: round_trips(env, port), lambda: slow_reader(env),
                              lambda: bulk(env)]):
        t()


def round_trips(env, port):
    for size, n in TRIPS.items():
        log = os.path.join(TMP, "strace.%d" % size)
        r, text = traced([PY, "-c", CLIENT, str(port), str(size), str(n)], env,
                         "recvfrom,splice", log)
        check("%d round trips of %d bytes through the relay come back whole" % (n, size),
              r.returncode == 0 and r.stdout.strip() == str(n), r.stdout + r.stderr[-500:])
        wasted = len(re.findall(r"= -1 EAGAIN", text))
        copied = len(re.findall(r"MSG_DONTWAIT, NULL, NULL\) = [1-9]", text))
        spliced = splices(text)
        relayed = copied + len(spliced["in"])
        # Two reads for nothing per round trip without the fix; the relay's
        # occasional look ahead (one chance in 16 per direction) stays well
        # under a quarter of one.
        check("%d-byte round trips: the relay's reads that found nothing are under a quarter"
              " per round trip (%d for %d round trips, beside %d that found bytes)"
              % (size, wasted, n, relayed),
              relayed >= 2 * n and wasted < n // 4, text[-2000:])
        # A copy would read each message into the relay's buffer and send
        # it from there: two copies more than the kernel's own. (The very
        # first may wait for the rate's first tokens, then from the buffer.)
        check("%d-byte round trips: each message goes through the relay's pipe (%d splices in"
              " moving %d bytes, %d out; %d reads into its buffer)"
              % (size, len(spliced["in"]), sum(spliced["in"]), len(spliced["out"]), copied),
              copied == 0 and sum(spliced["in"]) == 2 * n * size and
              len(spliced["out"]) >= 2 * n - 2,
              text[-2000:])


def traced(cmd, env, calls, log):
    """Runs cmd under strace, each thread's calls in a file of its own (no
    call split by another thread's); returns the run and their text."""
    for old in glob.glob(log + ".*"):
        os.unlink(old)
    r = subprocess.run(["strace", "-ff", "-qq", "-e", "trace=" + calls, "-o", log] + cmd,
                       env=env, capture_output=True, text=True, timeout=120)
    text = ""
    for name in sorted(glob.glob(log + ".*")):
        with open(name) as f:
            text += f.read()
    return r, text


SPLICE = r"splice\((\d+), NULL, (\d+), NULL, \d+, [A-Z_|]+\) = (\d+)"


def pipe_ends(text):
    """The relay pipe's ends: sockets are spliced from and to, the pipe's
    write end only to, its read end only from."""
    calls = re.findall(SPLICE, text)
    froms, tos = {c[0] for c in calls}, {c[1] for c in calls}
    return froms - tos, tos - froms


def splices(text):
    """The byte counts of the relay's splices that moved bytes: "in" from
    a socket into its pipe, "out" from the pipe to a socket."""
    _, write_end = pipe_ends(text)
    moved = {"in": [], "out": []}
    for _, to, n in re.findall(SPLICE, text):
        if int(n):
            moved["in" if to in write_end else "out"].append(int(n))
    return moved


# 8 MiB of a counting pattern from a server that writes 16 KiB at a time
# (reads of that size never fill the relay's buffer: no bulk transfer for
# it) to a client that first waits a second and then takes 1,000 bytes at
# a time: the relay's writes to the app stop short, and what it had
# spliced out of the server's socket must wait in its buffer and go on in
# order.
SLOW = r"""
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
time.sleep(1)
got = bytearray()
while True:
    b = s.recv(1000)
    if not b:
        break
    got += b
want = bytes(i % 251 for i in range(1 << 16)) * 128
print(len(got), got == want)
"""


def slow_reader(env):
    lst = socket.socket()
    lst.bind((ADDR, 0))
    lst.listen(1)
    port = lst.getsockname()[1]

    def serve():
        c, _ = lst.accept()
        data = bytes(i % 251 for i in range(1 << 16)) * 128
        for at in range(0, len(data), 16384):
            c.sendall(data[at:at + 16384])
            time.sleep(0.0005)
        c.close()

    threading.Thread(target=serve, daemon=True).start()
    conf = os.path.join(TMP, "slow.conf")
    with open(conf, "w") as f:
        f.write(POLICY % port)
    log = os.path.join(TMP, "strace.slow")
    r, text = traced([PY, "-c", SLOW, str(port)], dict(env, FAULTNET_CONFIG=conf),
                     "splice,read", log)
    lst.close()
    read_end, _ = pipe_ends(text)
    kept = [int(n) for fd, n in re.findall(r"read\((\d+), .*\) = (\d+)", text)
            if fd in read_end]
    check("8 MiB to an app slow to read arrive whole and in order through the relay",
          r.stdout.split() == [str(8 << 20), "True"], r.stdout + r.stderr[-500:])
    check("... and what the app's socket could not take was kept from the relay's pipe"
          " (%d reads of it, %d bytes)" % (len(kept), sum(kept)), len(kept) > 0, text[-2000:])



def free_port():
    s = socket.socket()
    s.bind((ADDR, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def bulk(env):
    """A bulk transfer between the benchmark's own client and server (C,
    fast enough that each of the relay's writes takes all it read): the
    relay's buffer grows while reads fill it, so that it reads as much at
    once as a blocking copy relay with 1 MiB does. It had stayed at 128 KiB
    (the growth waited for a buffer still full at the next read, which such
    writes never leave): six times the reads and writes of such a relay."""
    stream, port, mib = os.path.join(BUILD, "bench", "stream"), free_port(), 256
    server = subprocess.Popen([stream, "serve", ADDR, str(port)], stdout=subprocess.PIPE,
                              text=True)
    try:
        server.stdout.readline()
        conf = os.path.join(TMP, "bulk.conf")
        with open(conf, "w") as f:
            f.write(POLICY % port)
        log = os.path.join(TMP, "strace.bulk")
        r = subprocess.run(["strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=recvfrom",
                            "-o", log, stream, "bulk", ADDR, str(port), str(mib)],
                           env=dict(env, FAULTNET_CONFIG=conf), capture_output=True, text=True,
                           timeout=120)
    finally:
        server.kill()
        server.wait()
    with open(log) as f:
        sizes = [int(x) for x in re.findall(r"MSG_DONTWAIT, NULL, NULL\) = ([0-9]+)", f.read())]
    check("%d MiB through the relay" % mib, r.returncode == 0, r.stdout + r.stderr[-500:])
    check("... in reads of up to 1 MiB: %d reads, the largest %d bytes"
          % (len(sizes), max(sizes or [0])), max(sizes or [0]) > 512 * 1024, str(sizes[:50]))


main()
