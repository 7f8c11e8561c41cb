"""py_client.py - a real Python client meeting a fault: prints the
exception it got and how long it took, as "RESULT <name> <ms>".

usage: py_client.py socket|socket-read|asyncio|asyncio-read HOST PORT TIMEOUT_S
       py_client.py fetch HOST PORT TIMEOUT_S PATH
         (an HTTP GET read to the end: "RESULT <name> <ms> <bytes> <reads>")
"""
import asyncio
import socket
import sys
import time


def sock_connect(host, port, timeout):
    s = socket.create_connection((host, port), timeout=timeout)
    s.close()


def sock_read(host, port, timeout):
    s = socket.create_connection((host, port), timeout=timeout)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    s.recv(1)


got = [0, 0]


def fetch(host, port, timeout, path):
    s = socket.create_connection((host, port), timeout=timeout)
    s.sendall(b"GET " + path.encode() + b" HTTP/1.0\r\nHost: x\r\n\r\n")
    while True:
        d = s.recv(65536)
        if not d:
            break
        got[0] += len(d)
        got[1] += 1


async def aio_connect(host, port, timeout):
    _, w = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    w.close()


async def aio_read(host, port, timeout):
    r, w = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    w.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await w.drain()
    await asyncio.wait_for(r.read(1), timeout)


def main():
    mode, host, port, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    calls = {
        "socket": lambda: sock_connect(host, port, timeout),
        "socket-read": lambda: sock_read(host, port, timeout),
        "asyncio": lambda: asyncio.run(aio_connect(host, port, timeout)),
        "asyncio-read": lambda: asyncio.run(aio_read(host, port, timeout)),
        "fetch": lambda: fetch(host, port, timeout, sys.argv[5]),
    }
    t0 = time.monotonic()
    try:
        calls[mode]()
        name = "ok"
    except Exception as e:  # the point is to report whatever the client raised
        name = type(e).__name__
    ms = (time.monotonic() - t0) * 1000
    if mode == "fetch":
        print("RESULT %s %d %d %d" % (name, ms, got[0], got[1]))
    else:
        print("RESULT %s %d" % (name, ms))


main()
