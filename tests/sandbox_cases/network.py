# Try the host's loopback listener (PORT is set by the test) and an outside TEST-NET address.
# ruff: noqa: F821  (PORT is prepended by the test)
import socket
import time

outcome = {}
for name, address in (("loopback", ("127.0.0.1", PORT)), ("outside", ("192.0.2.1", 80))):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(2)
    started = time.monotonic()
    try:
        sock.connect(address)
        outcome[name] = "connected"
    except OSError as exc:
        outcome[name] = f"{type(exc).__name__}: {exc.strerror or exc}"
    finally:
        sock.close()
    outcome[name + "_seconds"] = round(time.monotonic() - started, 3)
try:
    socket.getaddrinfo("example.com", 80)
    outcome["dns"] = "resolved"
except OSError as exc:
    outcome["dns"] = type(exc).__name__
interfaces = [name for _index, name in socket.if_nameindex()]
