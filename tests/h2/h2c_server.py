#!/usr/bin/env python3
"""h2c_server.py - a clear-text HTTP/2 server that also takes HTTP/1.1's
Upgrade: h2c (RFC 7540 3.2), which nghttpd does not: the h2c tests'
peer. Each path answers 200 with the path's bytes repeated to the size a
?n= query asks (default 6), as stream 1 of an upgraded connection or as
any stream of a prior-knowledge one. usage: h2c_server.py PORT."""
import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import time


def body_for(path):
    p, _, q = path.partition("?")
    n = int(q[2:]) if q.startswith("n=") else 6
    return (p.encode() * (n // max(len(p), 1) + 1))[:n]


def answer(conn, sid, headers, pending):
    path = dict(headers).get(b":path", b"/").decode()
    body = body_for(path)
    conn.send_headers(sid, [(":status", "200"), ("content-length", str(len(body)))])
    pending[sid] = body
    flush(conn, pending)


def flush(conn, pending):
    """What the windows let out of each stream's body."""
    for sid, body in list(pending.items()):
        try:
            conn.local_flow_control_window(sid)
        except h2.exceptions.StreamClosedError:  # the client reset it
            del pending[sid]
            continue
        n = min(len(body), conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
        while body and n > 0:
            conn.send_data(sid, body[:n])
            body = body[n:]
            n = min(len(body), conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
        pending[sid] = body
        if not body:
            conn.end_stream(sid)
            del pending[sid]


def serve(s):
    cfg = h2.config.H2Configuration(client_side=False)
    conn = h2.connection.H2Connection(cfg)
    pending = {}
    first = s.recv(65536)
    if first.startswith(b"PRI * HTTP/2.0"):
        conn.initiate_connection()
        rest = first
    else:
        head, _, rest = first.partition(b"\r\n\r\n")
        lines = head.decode(errors="replace").split("\r\n")
        fields = {ln.split(":", 1)[0].strip().lower(): ln.split(":", 1)[1].strip()
                  for ln in lines[1:] if ":" in ln}
        if "h2c" not in fields.get("upgrade", ""):
            s.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            return
        s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
        # Debian's curl 7.88 misreads a 101 whose HTTP/2 preface comes in
        # the same read: the preface follows a little later.
        time.sleep(0.05)
        conn.initiate_upgrade_connection(fields["http2-settings"])
        answer(conn, 1, [(b":path", lines[0].split()[1].encode())], pending)
    s.sendall(conn.data_to_send())
    data = rest
    while True:
        if data:
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    answer(conn, ev.stream_id, ev.headers, pending)
            flush(conn, pending)
            s.sendall(conn.data_to_send())
        data = s.recv(65536)
        if not data:
            return


def main():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", int(sys.argv[1])))
    ls.listen(16)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=lambda: (serve(c), c.close()), daemon=True).start()


if __name__ == "__main__":
    main()
