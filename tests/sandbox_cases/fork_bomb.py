# A fork bomb kept safe: every child only sleeps; the parent forks until the kernel says no
# (RLIMIT_NPROC), then kills and reaps the children before the error propagates.
import os
import time

children = []
try:
    while len(children) < 10_000:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
finally:
    forked = len(children)
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    del children
