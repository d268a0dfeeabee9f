"""``python -m pglab``: the same as the ``pglab`` command."""

import sys

from pglab.app.cli import main

sys.exit(main())
