"""A/B settings: parse ``--a``/``--b`` values and apply them (guest side).

``feat:NAME[,NAME...]``, ``sysctl:key=value[,key=value...]``, ``sh:COMMAND``
or ``none``; SETTING_HELP spells out what each form accepts.
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import kernel


class AbbenchError(Exception):
    """Bad usage, input or setting: reported as ``abbench: error: ...``, exit 2.
    abbench's one error type, for both its halves (run here, report on the host)."""


class SettingError(AbbenchError):
    """A setting that cannot be applied."""


_FEATURE_RE = re.compile(r"^[A-Za-z0-9_]+$")
_SYSCTL_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/:]*$")


@dataclass(frozen=True)
class Setting:
    """A parsed ``--a``/``--b`` value."""

    spec: str
    kind: str       # "feat", "sysctl", "sh" or "none"
    items: tuple    # feature names, (key, value) pairs or (command,)


def parse_setting(spec: str) -> Setting:
    """Parse a setting string; AbbenchError explains what is wrong."""
    spec = spec.strip()
    if spec == "none":
        return Setting(spec, "none", ())
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in ("feat", "sysctl", "sh"):
        raise AbbenchError(f"bad setting {spec!r}: expected feat:NAME[,NAME], "
                           "sysctl:key=value[,key=value], sh:COMMAND or none")
    if kind == "sh":
        if not rest.strip():
            raise AbbenchError(f"bad setting {spec!r}: empty command")
        return Setting(spec, kind, (rest,))
    if kind == "feat":
        names = [n.strip() for n in rest.split(",")]
        for name in names:
            if not _FEATURE_RE.match(name):
                raise AbbenchError(f"bad setting {spec!r}: bad feature name "
                                   f"{name!r}")
        return Setting(spec, kind, tuple(names))
    pairs = []
    # A comma starts a new pair only when "key=" follows, so values may
    # contain commas (cpu lists).
    for item in re.split(r",(?=\s*[A-Za-z0-9_.\-/:]+=)", rest):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not _SYSCTL_KEY_RE.match(key) or ".." in key:
            raise AbbenchError(f"bad setting {spec!r}: expected key=value, "
                               f"got {item!r}")
        pairs.append((key, value.strip()))
    return Setting(spec, kind, tuple(pairs))


class Applier:
    """Applies settings through guest.kernel; paths are overridable for tests.

    ``save()`` reads, before anything changes, the state of every scheduler
    feature and sysctl that the settings (and the runner itself) may
    write; ``restore()`` writes those values back. ``sh:`` commands are
    the user's: what they change is not known, so not restored."""

    def __init__(self, features_path: str = kernel.FEATURES,
                 proc_sys: str = kernel.PROC_SYS):
        self.features_path = features_path
        self.proc_sys = proc_sys
        self.saved_features: dict[str, str] = {}  # NAME -> NAME or NO_NAME
        self.saved_sysctls: dict[str, str] = {}   # key -> value as read

    def save(self, settings, sysctls=()) -> None:
        """Remember the features and sysctls the settings name, and the
        sysctls keys `sysctls` (kernel.sched_schedstats), as they are now.
        A sysctl that is missing or cannot be read (write-only) is left
        out, with a warning when a setting names it."""
        names = {n.removeprefix("NO_") for st in settings if st.kind == "feat"
                 for n in st.items}
        if names:
            now = {t.removeprefix("NO_"): t for t in kernel.features(self.features_path)}
            self.saved_features = {n: now[n] for n in sorted(names) if n in now}
        named = [k for st in settings if st.kind == "sysctl" for k, _ in st.items]
        for key in [*named, *sysctls]:
            if key in self.saved_sysctls:
                continue
            try:
                self.saved_sysctls[key] = kernel.read(str(self.sysctl_path(key))).rstrip("\n")
            except kernel.KernelError as exc:
                if key in named:
                    print(f"abbench: warning: {exc}: {key} will not be restored",
                          file=sys.stderr)

    def restore(self) -> tuple[list[str], list[str]]:
        """Write back what save() read, where it changed: (what was
        restored, one line per problem). Every value is tried, whatever
        failed before it."""
        done, problems = [], []
        try:
            now = set(kernel.features(self.features_path)) if self.saved_features else set()
        except kernel.KernelError:
            now = set()
        for token in self.saved_features.values():
            if token in now:
                continue
            try:
                kernel.set_feature(token, self.features_path)
                done.append(token)
            except kernel.KernelError as exc:
                problems.append(str(exc))
        for key, value in self.saved_sysctls.items():
            path = str(self.sysctl_path(key))
            try:
                if kernel.read(path).rstrip("\n") == value:
                    continue
            except kernel.KernelError:
                pass  # write it all the same
            try:
                kernel.write(path, value + "\n")
                done.append(f"{key}={value}")
            except kernel.KernelError as exc:
                problems.append(str(exc))
        return done, problems

    def sysctl_path(self, key: str) -> Path:
        return Path(self.proc_sys) / key.replace(".", "/")

    def known_features(self) -> set[str]:
        """Feature names the kernel lists, without NO_ prefixes."""
        try:
            names = kernel.features(self.features_path)
        except kernel.KernelError as exc:
            raise SettingError(f"{exc} (debugfs mounted? kernel built with "
                               "CONFIG_SCHED_DEBUG?)") from None
        return {t.removeprefix("NO_") for t in names}

    def check(self, setting: Setting) -> None:
        """Static checks that need no change to the system."""
        if setting.kind == "feat":
            known = self.known_features()
            for name in setting.items:
                base = name.removeprefix("NO_")
                if base not in known:
                    raise SettingError(f"unknown scheduler feature {name!r} in "
                                       f"{setting.spec!r} (not listed in "
                                       f"{self.features_path})")
        elif setting.kind == "sysctl":
            for key, _ in setting.items:
                if not self.sysctl_path(key).is_file():
                    raise SettingError(f"unknown sysctl {key!r}: no "
                                       f"{self.sysctl_path(key)}")

    def apply(self, setting: Setting) -> None:
        try:
            if setting.kind == "feat":
                for name in setting.items:
                    kernel.set_feature(name, self.features_path)
            elif setting.kind == "sysctl":
                for key, value in setting.items:
                    kernel.write(str(self.sysctl_path(key)), value + "\n")
        except kernel.KernelError as exc:
            raise SettingError(f"setting {setting.spec!r}: {exc}") from None
        if setting.kind == "sh":
            self._run_sh(setting)

    @staticmethod
    def _run_sh(setting: Setting) -> None:
        proc = subprocess.run(["/bin/sh", "-c", setting.items[0]],
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              errors="replace", check=False)
        if proc.stdout:
            sys.stderr.write(proc.stdout)
        if proc.returncode != 0:
            raise SettingError(f"setting {setting.spec!r}: command exited "
                               f"with status {proc.returncode}")


# What parse_setting() accepts, for --help.
SETTING_HELP = f"""\
SETTING (--a, --b) is one of:
  feat:NAME[,NAME...]
      write each NAME to {kernel.FEATURES} (--features-path),
      in turn; NO_NAME turns NAME off. A name is letters, digits and _, and
      must be one the kernel lists there (checked before anything runs).
  sysctl:key=value[,key=value...]
      write each value to /proc/sys/<key, dots as slashes> (--proc-sys).
      A key is letters, digits and _ . - / : without "..", and must exist.
      A comma starts a new pair only when key= follows, so a value may hold
      commas: sysctl:kernel.foo=0-3,5 sets kernel.foo to 0-3,5.
  sh:COMMAND
      run COMMAND (everything after "sh:") with /bin/sh -c; output goes to
      stderr, a non-zero exit status is an error.
  none
      change nothing.
Both settings are checked, then applied once (A, then B) so that a typo fails
at once; during the run the setting is applied again before every run.
On exit (normal, error, Ctrl-C, SIGTERM) every feature and sysctl named
here, and kernel.sched_schedstats, get back the value read before the run;
what an sh: command changed is not known and stays.
"""
