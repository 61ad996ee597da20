# Try to write outside /work (OUTSIDE is set by the test to a host path next to the workspace).
# ruff: noqa: F821  (OUTSIDE is prepended by the test)
errors = {}
for path in ["/etc/x", "/usr/x", "/x", "/root/x", "/opt/rar/x", "/dev/x", "/proc/x", OUTSIDE]:
    try:
        with open(path, "w") as handle:
            handle.write("escaped")
        errors[path] = "written"
    except OSError as exc:
        errors[path] = exc.errno
with open("/work/inside.txt", "w") as handle:
    handle.write("fine")
