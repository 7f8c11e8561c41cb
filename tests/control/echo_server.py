"""echo_server.py - a loopback TCP echo server for the control tests.
usage: echo_server.py IP PORT"""
import socket
import sys
import threading

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1024)


def serve(c):
    with c:
        while True:
            d = c.recv(64)
            if not d:
                return
            c.sendall(d)


while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
