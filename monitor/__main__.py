"""``python -m monitor``: the same as the ``scorio-monitor`` script."""

import sys

from monitor.cli import main

sys.exit(main())
