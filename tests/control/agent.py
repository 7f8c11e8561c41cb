"""agent.py - a process under the shim that the control tests drive.

It reads commands, one a line, from DIR/<pid>.in (a FIFO) and appends one
answer line per command to DIR/<pid>.out:
  try HOST PORT   a non-blocking TCP connect: "connected", "blackholed"
                  (not connected after 0.1 s) or "error <errno name>"
  open HOST PORT  connect and keep the socket: "opened <n>" or the error
  send N          send a line on kept socket n, read the echo: "echoed"/...
  close N         close kept socket n
  udp             make a UDP socket and keep it: "udp <n>"
  sendto N HOST PORT  one datagram from kept socket n: "sent" or the error
  fork            os.fork(); the child becomes an agent too: "forked <pid>"
  spawn           start a new agent with subprocess: "spawned <pid>"
  exec            re-exec this program (same pid): answers "exec" first
  exit            leave
usage: agent.py DIR
"""
import errno
import os
import select
import socket
import subprocess
import sys

DIR = sys.argv[1]
kept = []
reading = None  # this agent's FIFO while serve() reads it


def fifo_path():
    return os.path.join(DIR, "%d.in" % os.getpid())


def answer(text):
    with open(os.path.join(DIR, "%d.out" % os.getpid()), "a") as f:
        f.write(text + "\n")


def attempt(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    rc = s.connect_ex((host, int(port)))
    if rc not in (0, errno.EINPROGRESS):
        s.close()
        return None, "error " + errno.errorcode.get(rc, str(rc))
    _, w, _ = select.select([], [s], [], 0.1)
    if not w:
        return s, "blackholed"
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        s.close()
        return None, "error " + errno.errorcode.get(err, str(err))
    return s, "connected"


def handle(words):
    cmd = words[0]
    if cmd == "try":
        s, what = attempt(words[1], words[2])
        if s:
            s.close()
        return what
    if cmd == "open":
        s, what = attempt(words[1], words[2])
        if s:
            kept.append(s)
            return "%s %d" % (what, len(kept) - 1)
        return what
    if cmd == "send":
        s = kept[int(words[1])]
        s.setblocking(True)
        s.settimeout(1.0)
        try:
            s.sendall(b"ping\n")
            return "echoed" if s.recv(16) == b"ping\n" else "garbled"
        except (socket.timeout, OSError) as e:
            return "no-echo " + type(e).__name__
    if cmd == "close":
        kept[int(words[1])].close()
        return "closed"
    if cmd == "udp":
        kept.append(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        return "udp %d" % (len(kept) - 1)
    if cmd == "sendto":
        try:
            kept[int(words[1])].sendto(b"ping\n", (words[2], int(words[3])))
            return "sent"
        except OSError as e:
            return "error " + errno.errorcode.get(e.errno, str(e.errno))
    if cmd == "fork":
        pid = os.fork()
        if pid == 0:
            reading.close()  # the parent's FIFO is the parent's alone
            serve()
            os._exit(0)
        return "forked %d" % pid
    if cmd == "spawn":
        p = subprocess.Popen([sys.executable, sys.argv[0], DIR])
        return "spawned %d" % p.pid
    if cmd == "exec":
        answer("exec")
        os.unlink(fifo_path())
        os.execv(sys.executable, [sys.executable, sys.argv[0], DIR])
    return "unknown " + cmd


def serve():
    global reading
    path = fifo_path()
    os.mkfifo(path)
    # Opened for reading and writing: the FIFO always has this reader, so
    # a test's line never lands in a pipe that only a forked child's copy
    # holds while this agent reopens it, and no read meets end of file
    # between two commands.
    with os.fdopen(os.open(path, os.O_RDWR), "r") as f:
        reading = f
        for line in f:
            words = line.split()
            if not words:
                continue
            if words[0] == "exit":
                os.unlink(path)
                return
            answer(handle(words))


serve()
