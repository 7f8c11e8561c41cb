"""outage.py - runs a command against the real outage that a faultnet fault
imitates, built in a private network namespace (its own loopback, nothing
else), so that tests can compare a client under faultnet with the same
client against the real thing:

  blackhole  nftables drops every packet to HOST (SYNs vanish)
  stall      a server at HOST:PORT that accepts and never reads or answers
  refuse     nothing listens at HOST:PORT (the kernel answers with a reset)
  reset      a server at HOST:PORT that accepts and resets 20 ms later (at
             once, the reset would often beat the client's own connect on
             loopback; real servers take a moment, and clients then meet
             the reset on their read or write, as faultnet's reset does)
  reset-after  a real HTTP server (python's http.server, serving DIR) whose
             connection is reset 50 ms after the first 1000 bytes of its
             answer (a reset follows the data by a round trip at least)

usage: outage.py KIND HOST PORT [--dir DIR] -- CMD [ARG...]   (root: uses unshare -n)
Exits with CMD's status; CMD's output passes through. With OUTAGE_MS_FILE
set, writes there the milliseconds CMD itself took.
"""
import os
import socket
import struct
import subprocess
import sys
import threading
import time


def pipe(src, dst, limit=None, done=None):
    """Copies src to dst; returns True when limit bytes have gone (the
    rest is not sent)."""
    sent = 0
    try:
        while True:
            data = src.recv(65536)
            if not data:
                dst.shutdown(socket.SHUT_WR)
                break
            if limit is not None and sent + len(data) >= limit:
                dst.sendall(data[:limit - sent])
                return True
            dst.sendall(data)
            sent += len(data)
    except OSError:
        pass
    finally:
        if done:
            done.set()
    return False


def reset_after(c, host, inner):
    """The client's connection to the real server, reset after 1000 bytes
    of the server's answer."""
    try:
        up = socket.create_connection((host, inner))
    except OSError:
        c.close()
        return
    done = threading.Event()
    threading.Thread(target=pipe, args=(c, up, None, done), daemon=True).start()
    if pipe(up, c, 1000):
        # On a real network the reset follows the data by a round trip at
        # least; on loopback it would ride with it.
        time.sleep(0.05)
        # Wake the thread reading c, then close with a zero linger: a reset.
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.shutdown(socket.SHUT_RD)
        done.wait(2)
    c.close()
    up.close()


def reset_now(c):
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


def serve(kind, host, port, directory=None):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(128)
    held = []

    def loop():
        while True:
            c, _ = s.accept()
            if kind == "reset-after":
                threading.Thread(target=reset_after, args=(c, host, port + 1), daemon=True).start()
            elif kind == "reset":
                threading.Timer(0.02, reset_now, args=(c,)).start()
            else:
                held.append(c)  # never read, never answered
    threading.Thread(target=loop, daemon=True).start()


def inside(kind, host, port, directory, cmd):
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    if kind == "reset-after":
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(port + 1), "--bind", host],
                                  cwd=directory or "/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection((host, port + 1), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
    if kind == "blackhole":
        fam = "ip6" if ":" in host else "ip"
        for rule in (["add", "table", "inet", "outage"],
                     ["add", "chain", "inet", "outage", "out", "{ type filter hook output priority 0; }"],
                     ["add", "rule", "inet", "outage", "out", fam, "daddr", host, "drop"]):
            subprocess.run(["nft"] + rule, check=True)
    if kind in ("stall", "reset", "reset-after"):
        serve(kind, host, port)
    elif kind not in ("refuse", "blackhole"):
        sys.exit("outage.py: unknown kind %s" % kind)
    t0 = time.monotonic()
    rc = subprocess.run(cmd).returncode
    took = time.monotonic() - t0
    # The command's own time, for a caller that compares it with the same
    # command under faultnet: the namespace, the outage and the server
    # behind it (python's http.server, 0.2 to 0.6 s to start on a loaded
    # machine) are no part of what the client met.
    if os.environ.get("OUTAGE_MS_FILE"):
        with open(os.environ["OUTAGE_MS_FILE"], "w") as f:
            f.write("%d\n" % int(took * 1000))
    if kind == "reset-after":
        server.kill()
    return 128 - rc if rc < 0 else rc  # killed by a signal: as a shell reports it


def main():
    args = sys.argv[1:]
    here = args[0] == "--inside"
    if here:
        args = args[1:]
    directory = None
    if len(args) > 4 and args[3] == "--dir":
        directory = args[4]
        args = args[:3] + args[5:]
    if len(args) < 5 or args[3] != "--":
        sys.exit(__doc__)
    if here:
        sys.exit(inside(args[0], args[1], int(args[2]), directory, args[4:]))
    os.execvp("unshare", ["unshare", "-n", sys.executable, os.path.abspath(__file__), "--inside"] + sys.argv[1:])


main()
