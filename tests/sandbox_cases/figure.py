# A matplotlib figure, a CSV and assorted variables.
import math
import os

import matplotlib.pyplot as plt
import numpy as np

xs = np.linspace(0, 2 * math.pi, 50)
fig, ax = plt.subplots()
ax.plot(xs, np.sin(xs))
os.makedirs("figures", exist_ok=True)
fig.savefig("figures/sine.png")
with open("table.csv", "w") as handle:
    handle.write("x,sin\n")
    for x in xs[:3]:
        handle.write(f"{x},{math.sin(x)}\n")
count = 3
mean = np.float64(np.sin(xs).mean())
small = np.arange(4)
big = np.zeros(100_000)
label = "sine"
nested = {"a": [1, 2.5, None], "b": {"c": True}}
huge_int = 2**70
not_a_number = float("nan")


def helper():
    return 1
