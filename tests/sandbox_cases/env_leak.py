# Look for the parent's API key everywhere this process can read an environment.
import os

found = {"os.environ": any(v.startswith("sk-test-") for v in os.environ.values())}
readable = {}
for pid in [*sorted(p for p in os.listdir("/proc") if p.isdigit()), "self"]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            data = handle.read()
    except OSError as exc:
        readable[pid] = exc.strerror
        continue
    readable[pid] = "readable"
    found[f"/proc/{pid}/environ"] = b"sk-test-" in data or b"OPENAI_API_KEY" in data
names = sorted(os.environ)
