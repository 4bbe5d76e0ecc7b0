"""The tools' command-line conventions (both halves, standard library):
usage errors, and reading a JSON file named on the command line."""
from __future__ import annotations

import argparse
import json
import os
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


def run_subcommand(parser: argparse.ArgumentParser, argv, errors: tuple) -> int:
    """Parse argv and run the chosen subcommand's ``func``: an error of one
    of the `errors` types prints "TOOL: error: ..." and returns 2; a
    report piped into head exits quietly with 1."""
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except errors as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # report piped into head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def read_json(path: str, error: type[Exception]):
    """The JSON document in the file path, read as UTF-8; an `error` with
    one clear message when it cannot be read or is not JSON text."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not JSON: {exc}") from None
    except UnicodeDecodeError:
        raise error(f"{path}: not JSON (not UTF-8 text)") from None
