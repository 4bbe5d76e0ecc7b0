"""The matplotlib helpers of the reports' ``--plot`` (host side): abbench
and kernelab draw their figures with these."""
from __future__ import annotations

import os

from .guest.settings import AbbenchError

# What --plot writes: the file's suffix names the format.
FORMATS = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".svg": "svg", ".pdf": "pdf"}


def plot_format(path: str) -> str:
    """The matplotlib format that path's suffix names (case ignored), or a
    clear error: checked before anything is read or written."""
    suffix = os.path.splitext(path)[1]
    if suffix.lower() not in FORMATS:
        got = f"{suffix!r} is not" if suffix else "no suffix:"
        raise AbbenchError(f"--plot {path}: {got} a format it writes; name the file "
                           f"with one of {', '.join(FORMATS)}")
    return FORMATS[suffix.lower()]


def pyplot():
    """matplotlib.pyplot on the file-only backend, or a clear error."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise AbbenchError("--plot needs matplotlib (pip install matplotlib)") from None
    return plt


def save(plt, fig, path: str) -> None:
    """Write fig to path in the format its suffix names, and close it; a
    clear error if it cannot."""
    try:
        fig.savefig(path, format=plot_format(path), dpi=100)
    except OSError as exc:
        raise AbbenchError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
