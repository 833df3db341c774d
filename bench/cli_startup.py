"""Benchmark: wall time of `cloudzones` start-up for help and offline commands vs a bare interpreter.

Each command runs ``--runs`` times as a fresh process; the floor is ``python -c pass`` (the
interpreter's own start-up, site-packages included), measured the same way in the same run.

Goals: ``cloudzones --help`` <= 0.3 s; ``cloudzones zone --imds-document FILE`` <= 0.5 s.

Run:  PYTHONPATH=. python bench/cli_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
IMDS = ROOT / "fixtures" / "imds" / "azure" / "instance_legacy_2017-04-02_no_zone_docs.json"
COMMANDS = {
    "python -c pass (floor)": ["-c", "pass"],
    "cloudzones --help (goal <= 0.3 s)": ["-m", "cloudzones.cli", "--help"],
    "cloudzones zone --imds-document (goal <= 0.5 s)": ["-m", "cloudzones.cli", "zone", "--imds-document", str(IMDS)],
    "cloudzones plan outage --help": ["-m", "cloudzones.cli", "plan", "outage", "--help"],
    "cloudzones controller --help": ["-m", "cloudzones.cli", "controller", "--help"],
    "cloudzones lb plan --help": ["-m", "cloudzones.cli", "lb", "plan", "--help"],
}


def timed(argv: list[str]) -> float:
    """Seconds for one fresh process."""
    started = time.perf_counter()
    subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, check=False)  # noqa: S603
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    floor = None
    for label, argv in COMMANDS.items():
        median = statistics.median(timed(argv) for _ in range(args.runs))
        floor = floor or median
        print(f"{label:50s} median {median:5.2f} s ({median / floor:4.1f}x the bare interpreter)")


if __name__ == "__main__":
    main()
