"""``python -m sqla_ids.cli``."""

import sys

from sqla_ids.cli import main

sys.exit(main())
