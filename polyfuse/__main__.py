"""``python -m polyfuse``: the ``polyfuse`` command."""

import sys

from polyfuse.apps.cli import main

sys.exit(main())
