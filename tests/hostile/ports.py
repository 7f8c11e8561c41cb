"""ports.py - N connect/close cycles to a loopback server, the client
closing first (so its side keeps TIME_WAIT); prints the failures by errno as
JSON. Run in a private network namespace with a small port range, with and
without the shim, by hostile_app.py (defect 15).

usage: ports.py N
"""
import json
import socket
import sys
import threading

srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.73.9.1", 7309))
srv.listen(1024)


def drain(c):
    try:
        while c.recv(10):
            pass
    except OSError:
        pass
    c.close()


def accept():
    while True:
        c, _ = srv.accept()
        threading.Thread(target=drain, args=(c,), daemon=True).start()


threading.Thread(target=accept, daemon=True).start()
fails = {}
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    try:
        s.connect(("127.73.9.1", 7309))
        s.send(b"x")
    except OSError as e:
        fails[e.errno] = fails.get(e.errno, 0) + 1
    s.close()
print(json.dumps(fails))
