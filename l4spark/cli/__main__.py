"""``python -m l4spark.cli ...``: the ``l4spark`` command without its console script."""

import sys

from l4spark.cli import main

sys.exit(main())
