"""victim.py - the hostile-user suite's victim, run under the shim: meets a
refuse and a UDP drop rule (so the shim opens those endpoints), prints the
loopback ports of the shim's endpoints it holds ("tcp PORT" for bound TCP
sockets that do not listen, "udp PORT"), then waits for stdin to close and
prints what its next refused connect and dropped datagram did.
"""
import os
import socket
import sys


def shim_endpoints():
    """Loopback TCP sockets that are bound but neither listen nor connect,
    and loopback UDP sockets, among this process's fds (the shim's own)."""
    res = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            s = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue
        try:
            ip, port = s.getsockname()[:2]
            if ip != "127.0.0.1":
                continue
            if s.type == socket.SOCK_DGRAM:
                res.append("udp %d" % port)
            elif not s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                try:
                    s.getpeername()
                except OSError:
                    res.append("tcp %d" % port)
        except (OSError, ValueError, TypeError):
            pass
        finally:
            s.close()
    return res


def attempt():
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.73.6.1", 80))
        r = "connected"
    except OSError as e:
        r = type(e).__name__
    s.close()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"secret", ("127.73.7.1", 53))
    u.close()
    return r


first = attempt()
for e in shim_endpoints():
    print(e)
print("first", first, flush=True)
sys.stdin.read()
print("then", attempt(), flush=True)
