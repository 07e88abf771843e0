"""The host's processor, as /proc/cpuinfo names it: XLA compiles a CPU program for it (the
compilation cache keeps a folder per processor) and a measured speed is quoted with it (the
benchmarks' JSON and first line)."""
from __future__ import annotations

import os
import platform


def fields(keys: tuple, cpuinfo: str | None = None) -> dict:
    """``keys`` of the first processor in ``cpuinfo`` (default: /proc/cpuinfo's text), values stripped;
    empty where there is no such file."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    found: dict = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key in keys and key not in found:
            found[key] = value.strip()
    return found


def describe(cpuinfo: str | None = None) -> str:
    """The processor a ratio measured on it must be quoted with: the model name, which on cloud
    machines is often only "AMD EPYC" or "Intel Xeon", so with its family and model (AMD family 25
    model 1 is Zen 3, model 17 Zen 4), AVX-512 when present, and the CPU count."""
    found = fields(("model name", "cpu family", "model", "flags"), cpuinfo)
    if "model name" not in found:
        return f"{platform.machine()} {platform.processor()} ({os.cpu_count()} CPUs)".strip()
    avx512 = ", AVX-512" if "avx512f" in found.get("flags", "").split() else ""
    return (f"{found['model name']} (family {found.get('cpu family', '?')} model {found.get('model', '?')}"
            f"{avx512}, {os.cpu_count()} CPUs)")
