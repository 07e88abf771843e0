"""fedpne_jax.core.processor: the first processor's fields of /proc/cpuinfo, and the line the
benchmarks quote their ratios with."""
import os

from fedpne_jax.core import processor

ZEN4 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
        "flags\t\t: fpu avx2 avx512f fma\n\nprocessor\t: 1\ncpu family\t: 99\nmodel\t\t: 1\nmodel name\t: other\n")
ZEN3 = "processor\t: 0\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n"


def test_fields_are_the_first_processors_and_only_those_asked():
    assert processor.fields(("model name", "model", "cache size"), ZEN4) == {"model name": "AMD EPYC", "model": "17"}
    assert processor.fields(("model name",), "") == {}


def test_the_description_tells_zen_3_from_zen_4_and_names_avx512():
    cpus = os.cpu_count()
    assert processor.describe(ZEN4) == f"AMD EPYC (family 25 model 17, AVX-512, {cpus} CPUs)"
    assert processor.describe(ZEN3) == f"AMD EPYC (family 25 model 1, {cpus} CPUs)"
    assert processor.describe("").endswith(f"({cpus} CPUs)")          # no /proc/cpuinfo: what platform knows
