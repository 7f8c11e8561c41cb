"""outage.py - runs a command against the real outage that a faultnet fault
imitates, built in a private network namespace (its own loopback, nothing
else), so that tests can compare a client under faultnet with the same
client against the real thing:

  blackhole  nftables drops every packet to HOST (SYNs vanish)
  stall      a server at HOST:PORT that accepts and never reads or answers
  refuse     nothing listens at HOST:PORT (the kernel answers with a reset)
  reset      a server at HOST:PORT that accepts and resets at once

usage: outage.py KIND HOST PORT -- CMD [ARG...]   (root: uses unshare -n)
Exits with CMD's status; CMD's output passes through.
"""
import os
import socket
import struct
import subprocess
import sys
import threading


def serve(kind, host, port):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(128)
    held = []

    def loop():
        while True:
            c, _ = s.accept()
            if kind == "reset":
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.close()
            else:
                held.append(c)  # never read, never answered
    threading.Thread(target=loop, daemon=True).start()


def inside(kind, host, port, cmd):
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    if kind == "blackhole":
        fam = "ip6" if ":" in host else "ip"
        for rule in (["add", "table", "inet", "outage"],
                     ["add", "chain", "inet", "outage", "out", "{ type filter hook output priority 0; }"],
                     ["add", "rule", "inet", "outage", "out", fam, "daddr", host, "drop"]):
            subprocess.run(["nft"] + rule, check=True)
    elif kind in ("stall", "reset"):
        serve(kind, host, port)
    elif kind != "refuse":
        sys.exit("outage.py: unknown kind %s" % kind)
    return subprocess.run(cmd).returncode


def main():
    if sys.argv[1] == "--inside":
        kind, host, port, cmd = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[6:]
        sys.exit(inside(kind, host, port, cmd))
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        sys.exit(__doc__)
    os.execvp("unshare", ["unshare", "-n", sys.executable, os.path.abspath(__file__), "--inside"] + sys.argv[1:])


main()
