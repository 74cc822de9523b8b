"""spark-submit entry point of the nightly batch:

    spark-submit --master M --py-files dist/l4spark-<v>-py3-none-any.whl jobs/nightly.py \
        --logs-root R --warehouse W [--date D]

The same arguments as ``l4spark nightly``; the work is in ``l4spark.nightly.batch``.
"""

import sys

from l4spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["nightly", *sys.argv[1:]]))
