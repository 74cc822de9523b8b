"""spark-submit entry point: ``spark-submit jobs/parse.py --logs-root R --warehouse W [--jobs ...]``.

Thin by design: the same arguments as ``l4spark parse``; the work is in ``l4spark.parse.pipeline``.
"""

import sys

from l4spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["parse", *sys.argv[1:]]))
