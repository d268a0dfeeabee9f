"""``python -m pglab.workloads.tsbs``: the loader program a study runs on its client host."""

import sys

from pglab.workloads.tsbs import main

sys.exit(main())
