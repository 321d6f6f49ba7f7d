"""``python -m tests.reliability_load.harness``: ``make load`` and ``make faults``."""

import sys

from tests.reliability_load.harness import main

sys.exit(main())
