"""attacker.py - another account trying to take the victim's shim endpoints:
for each "tcp PORT" / "udp PORT" line on stdin, binds 127.0.0.1:PORT with
SO_REUSEADDR (and listens, for TCP) and holds it; prints "took KIND PORT" or
"refused KIND PORT ERRNO", then waits for stdin to close. Any datagram that
reaches a taken UDP port is printed as "read ...".
"""
import socket
import sys

held = []
for line in sys.stdin:
    if not line.strip():
        break
    kind, port = line.split()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", int(port)))
        if kind == "tcp":
            s.listen(8)
        held.append(s)
        print("took", kind, port, flush=True)
    except OSError as e:
        print("refused", kind, port, e.errno, flush=True)
print("done", flush=True)
sys.stdin.read()
for s in held:
    s.setblocking(False)
    try:
        print("read", s.recv(100) if s.type == socket.SOCK_DGRAM else s.accept(), flush=True)
    except OSError:
        pass
