"""How long `hexbuild --help` and `hexbuild --version` take, against a bare `python -c pass`
(the floor any Python CLI pays), measured in one run. Prints figures."""

import statistics
import subprocess
import sys
import time

RUNS = 10


def timed(argv):
    samples = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main():
    floor = timed([sys.executable, "-c", "pass"])
    rows = [("python -c pass", floor)]
    for args in (["--version"], ["--help"], ["build", "--help"]):
        rows.append(("hexbuild " + " ".join(args), timed([sys.executable, "-m", "hexbuild", *args])))
    print(f"{'command':<28} {'median s':>9} {'x python':>9}")
    for name, t in rows:
        print(f"{name:<28} {t:9.3f} {t / floor:9.1f}")


if __name__ == "__main__":
    main()
