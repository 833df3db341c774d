"""``python -m cloudzones.cli``."""

import sys

from cloudzones.cli import main

sys.exit(main())
