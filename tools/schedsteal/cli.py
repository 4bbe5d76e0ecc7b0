"""The tools' one argparse convention (both halves, standard library)."""
from __future__ import annotations

import argparse
import sys


class ToolParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors read like every other error of
    the tool: "TOOL: error: ...", exit status 2. TOOL is ``tool`` when a
    subclass sets it, else the first word of the program name (so that a
    subcommand's parser says "schedtrace", not "schedtrace report")."""

    tool: str | None = None

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.tool or self.prog.split()[0]}: error: {message}\n")
