"""XLA's programs kept on disk between processes: JAX's persistent compilation cache, in a folder of
this package's, for the command line and for callers who ask.

A later process still traces and lowers, but skips XLA, with every result the same bit for bit.
``$FEDPNE_COMPILE_CACHE``, else ``$XDG_CACHE_HOME/fedpne-jax/xla``, else ``~/.cache/fedpne-jax/xla``
(a word of ``OFF`` in any case, or 0 in any spelling, turns it off), one folder per JAX version and
processor; a ``JAX_COMPILATION_CACHE_DIR`` the caller set is left as it is, and so is a
``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``.  A folder another user owns or others may write to
is not used, and the cache keeps ``MAX_BYTES`` at most.

Why per processor, the safety rules and the times: docs/guides/hosts.md, section "Compilation
cache".
"""
from __future__ import annotations

import hashlib
import os
import platform
import stat
import warnings
from pathlib import Path

import jax

from fedpne_jax.core import processor
from fedpne_jax.core.result import versions

ENV = "FEDPNE_COMPILE_CACHE"
OFF = ("off", "0", "false", "no", "none")
MAX_BYTES = 1 << 30
CACHE_SUFFIXES = ("-cache", "-atime")     # the names JAX gives its entries and their access times
# A program that compiles faster than this is not worth a file.  Of the quick gallery's 134
# programs, 48 compile in a second or more (JAX's default threshold), 35 in 0.1-1 s and 51 in less;
# at 0.1 s its cache holds 78 programs in 9 MB.
MIN_COMPILE_SECONDS = 0.1
# JAX reads its own variable for the threshold when it is imported; a caller who set it keeps it.
MIN_COMPILE_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"


def is_off(value: str) -> bool:
    """Whether a setting of ENV turns the cache off: a word of OFF in any case, or 0 in any spelling
    ("0.0" is not a folder anyone means)."""
    text = value.strip().lower()
    if text in OFF:
        return True
    try:
        return float(text) == 0
    except ValueError:
        return False


def default_root(environ=None) -> Path:
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fedpne-jax" / "xla"


def processor_tag(cpuinfo: str | None = None) -> str:
    """12 hex digits that differ between processors whose instruction sets differ: the model name
    and feature flags of /proc/cpuinfo's first processor (elsewhere, what ``platform`` knows)."""
    fields = {k: " ".join(sorted(v.split())) if k in ("flags", "Features") else v
              for k, v in processor.fields(("model name", "flags", "Features", "CPU implementer", "CPU part"),
                                           cpuinfo).items()}
    text = repr(sorted(fields.items())) if fields else f"{platform.machine()} {platform.processor()}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def folder(root: str | os.PathLike) -> Path:
    """The subfolder of ``root`` for this JAX, jaxlib and processor."""
    v = versions()
    return Path(root) / f"jax-{v['jax']}-jaxlib-{v['jaxlib']}-{processor_tag()}"


def _private(path: Path) -> bool:
    """Owned by this user and writable by no one else (what JAX loads from it, it runs)."""
    info = path.stat()
    owner = getattr(os, "getuid", lambda: info.st_uid)()
    return info.st_uid == owner and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def prune(root: Path, max_bytes: int = MAX_BYTES) -> int:
    """Delete the cache files written longest ago in ``root``'s folders (those :func:`folder` names,
    of any JAX or processor; nothing else in ``root`` is touched) until they hold at most three
    quarters of ``max_bytes``, when they hold more.  Returns the bytes freed."""
    files = []
    for sub in root.glob("jax-*-jaxlib-*"):
        if sub.is_symlink() or not sub.is_dir():
            continue
        for p in sub.iterdir():
            try:
                info = p.lstat()
            except OSError:          # another process pruned it first
                continue
            if stat.S_ISREG(info.st_mode) and p.name.endswith(CACHE_SUFFIXES):
                files.append((info.st_mtime, info.st_size, p))
    total = sum(size for _, size, _ in files)
    if total <= max_bytes:
        return 0
    freed = 0
    for _, size, p in sorted(files, key=lambda f: (f[0], str(f[2]))):
        if total - freed <= max_bytes * 3 // 4:
            break
        try:
            p.unlink()
            freed += size
        except OSError:
            pass
    return freed


def enable(path: str | os.PathLike | None = None, environ=None) -> Path | None:
    """Turn JAX's persistent compilation cache on for this process, in ``path`` (default: from the
    environment, see the module's docstring), and return the folder used; None when it is off, the
    caller configured JAX's cache themselves, or the folder cannot be used.  Call it before the first
    program compiles; later calls change nothing once a folder is in use."""
    environ = os.environ if environ is None else environ
    current = jax.config.values["jax_compilation_cache_dir"]
    if current:
        return Path(current)
    value = os.fspath(path) if path is not None else environ.get(ENV, "").strip()
    if is_off(value):
        return None
    root = Path(value).expanduser() if value.strip() else default_root(environ)
    target = folder(root)
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        target.mkdir(mode=0o700, exist_ok=True)
        if not (_private(root) and _private(target)):
            warnings.warn(f"the compilation cache {root} is not used: another user owns it or others may write "
                          f"to it, and JAX runs what it loads from there; set {ENV} to a private folder or off",
                          stacklevel=2)
            return None
        if not os.access(target, os.W_OK | os.X_OK):
            return None
        prune(root)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(target))
    if MIN_COMPILE_ENV not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return target
