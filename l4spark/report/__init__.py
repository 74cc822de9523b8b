"""What people read: the per-job report and the analysts' readers.

In: a job's diagnosis (plain pandas/dicts; ``diagnosed`` makes it from a ``Diagnosis``), or the
warehouse's result tables (``analysis``, pyarrow, for the notebooks). Out: an HTML page, Markdown
for tickets, a terminal summary; small pandas frames. No Spark here; matplotlib only to draw.
See docs/report.md.
"""

from l4spark.report.files import safe_file_stem, write_reports
from l4spark.report.html_page import render_html
from l4spark.report.markdown_text import render_markdown
from l4spark.report.model import JobReport, ReportInputError
from l4spark.report.terminal_text import render_terminal

__all__ = ["JobReport", "ReportInputError", "render_html", "render_markdown", "render_terminal",
           "safe_file_stem", "write_reports"]
