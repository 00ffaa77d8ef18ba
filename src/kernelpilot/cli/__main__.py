"""``python -m kernelpilot.cli``: the ``kernelpilot`` command line."""

from kernelpilot.cli import app

app()
