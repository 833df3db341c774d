"""``kubectl zones``: cloudzones as a kubectl plugin (the ``kubectl-zones`` executable on the PATH).

``kubectl zones report [flags]`` is ``cloudzones report``; ``kubectl zones outage ZONE [flags]`` is
``cloudzones plan outage --zone ZONE``. Both read the live cluster through kubectl's usual
``--kubeconfig``, ``--context``, ``-n`` and ``-A``, or a snapshot with ``-f``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = """usage: kubectl zones report [-f SNAPSHOT] [-n NS | -A] [-o table|json|yaml] [--html FILE]
       kubectl zones outage ZONE [-f SNAPSHOT] [-n NS | -A] [-o table|json|yaml]

See the cluster's zones: capacity, spread, and what losing each zone does (cloudzones).
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Translate the plugin's words into cloudzones' and run it; returns the exit code."""
    from cloudzones.cli import main as cloudzones

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "report":
        return cloudzones(["report", *rest])
    if command == "outage":
        if not rest or rest[0].startswith("-"):
            print("kubectl zones outage: error: say which zone to lose: kubectl zones outage ZONE", file=sys.stderr)
            return 2
        return cloudzones(["plan", "outage", "--zone", rest[0], *rest[1:]])
    print(f"kubectl zones: error: unknown command {command!r}; try 'kubectl zones --help'", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover - the console script calls main()
    sys.exit(main())
