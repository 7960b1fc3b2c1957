"""The command line, ``python -m planner``: one module per subcommand.  Imported by nothing
but ``planner.__main__``."""

from planner.cli.main import main

__all__ = ["main"]
