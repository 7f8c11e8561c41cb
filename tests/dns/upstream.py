"""A nameserver for the DNS tests, on loopback in the test's own network
namespace: UDP and TCP on one address, an A record 127.0.0.9 (AAAA ::1)
for every name, counting the queries it answers in a file (one line per
query: transport and name), so that a test can tell what reached it."""
import socket
import struct
import sys
import threading


def name_of(msg):
    labels, at = [], 12
    while msg[at]:
        n = msg[at]
        labels.append(msg[at + 1:at + 1 + n].decode().lower())
        at += 1 + n
    return ".".join(labels), at + 5


def answer(msg):
    name, end = name_of(msg)
    qtype = struct.unpack("!H", msg[end - 4:end - 2])[0]
    rdata = {1: socket.inet_pton(socket.AF_INET, "127.0.0.9"),
             28: socket.inet_pton(socket.AF_INET6, "::1")}.get(qtype)
    head = msg[:2] + bytes([0x81 | (msg[2] & 1), 0x80]) + struct.pack("!HHHH", 1, 1 if rdata else 0, 0, 0)
    out = head + msg[12:end]
    if rdata:
        out += struct.pack("!HHHIH", 0xC00C, qtype, 1, 60, len(rdata)) + rdata
    return name, out


def log(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")


def udp(addr, port, path):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)  # a burst of 400 queries
    s.bind((addr, port))
    while True:
        msg, peer = s.recvfrom(65535)
        name, out = answer(msg)
        log(path, "udp " + name)
        s.sendto(out, peer)


def tcp_client(c, path):
    with c:
        while True:
            head = c.recv(2, socket.MSG_WAITALL)
            if len(head) < 2:
                return
            msg = c.recv(struct.unpack("!H", head)[0], socket.MSG_WAITALL)
            name, out = answer(msg)
            log(path, "tcp " + name)
            c.sendall(struct.pack("!H", len(out)) + out)


def tcp(addr, port, path):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(16)
    while True:
        c, _ = s.accept()
        threading.Thread(target=tcp_client, args=(c, path), daemon=True).start()


if __name__ == "__main__":
    addr, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    threading.Thread(target=tcp, args=(addr, port, path), daemon=True).start()
    print("ready", flush=True)
    udp(addr, port, path)
