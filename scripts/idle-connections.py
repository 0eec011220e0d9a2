#!/usr/bin/env python3
"""Holds N logged-in idle connections to a `turnstile serve` and prints the server's threads.

Usage: scripts/idle-connections.py N PORT SERVER_PID
  (start the server with --thread-handling pool-of-threads --max-connections above N, and
  `ulimit -n` above N in both shells). Each connection logs in as root without a password
  (the server must have none), then stays silent; after all are in, the server's `Threads:`
  line from /proc is printed and every thousandth connection is pinged (COM_PING) to show it
  is still served.
"""
import socket
import struct
import sys
import time


def packet(sock):
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    n = head[0] | head[1] << 8 | head[2] << 16
    body = b""
    while len(body) < n:
        body += sock.recv(n - len(body))
    return head[3], body


def login(port):
    s = socket.create_connection(("127.0.0.1", port))
    seq, _greeting = packet(s)
    # HandshakeResponse41: PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH, empty auth data.
    caps = 0x200 | 0x8000 | 0x80000
    body = struct.pack("<IIB", caps, 1 << 24, 0x21) + b"\0" * 23
    body += b"root\0" + b"\0" + b"mysql_native_password\0"
    s.sendall(struct.pack("<I", len(body))[:3] + bytes([seq + 1]) + body)
    _, ok = packet(s)
    if ok[0] != 0:
        sys.exit(f"login refused: {ok!r}")
    return s


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    n, port, pid = (int(a) for a in sys.argv[1:])
    start = time.time()
    conns = []
    for i in range(n):
        conns.append(login(port))
        if (i + 1) % 1000 == 0:
            print(f"{i + 1} connected ({time.time() - start:.1f} s)", flush=True)
    time.sleep(2)
    with open(f"/proc/{pid}/status") as f:
        threads = next(line.split()[1] for line in f if line.startswith("Threads:"))
    print(f"{n} idle connections logged in; the server runs {threads} threads")
    for s in conns[::1000]:
        s.sendall(b"\x01\x00\x00\x00\x0e")
        _, ok = packet(s)
        if ok[0] != 0:
            sys.exit(f"ping refused: {ok!r}")
    print(f"{len(conns[::1000])} pings answered")


if __name__ == "__main__":
    main()
