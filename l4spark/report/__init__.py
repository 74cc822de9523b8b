"""The per-job diagnosis report: one job's diagnosis (plain pandas/dicts) as an HTML page,
Markdown for tickets, or a terminal summary. No Spark; matplotlib is imported only to draw.

See docs/report.md.
"""

from l4spark.report.files import safe_file_stem, write_reports
from l4spark.report.html_page import render_html
from l4spark.report.markdown_text import render_markdown
from l4spark.report.model import JobReport, ReportInputError
from l4spark.report.terminal_text import render_terminal

__all__ = ["JobReport", "ReportInputError", "render_html", "render_markdown", "render_terminal",
           "safe_file_stem", "write_reports"]
