"""The command line's persistent compilation cache (fedpne_jax.core.compile_cache): a second process
loads the programs the first compiled and computes the same bits; processors with other instruction
sets get other folders; pruning touches only the cache's own files; a folder others may write to,
an unusable one, or the caller's own JAX setting is left alone."""
import os
import subprocess
import sys
import textwrap
import time

import jax
import pytest

from fedpne_jax.core import compile_cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTEL = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R)\nflags\t\t: fpu avx2 avx512f fma\n\n" \
        "processor\t: 1\nmodel name\t: Intel(R) Xeon(R)\nflags\t\t: fpu avx2 avx512f fma\n"
AMD = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n"


@pytest.fixture
def jax_cache_setting():
    """enable() sets process-wide JAX options: start without the suite's own cache folder
    (tests/conftest.py), put them back after, and compile nothing in between."""
    saved = (jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs)
    jax.config.update("jax_compilation_cache_dir", None)
    yield
    jax.config.update("jax_compilation_cache_dir", saved[0])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", saved[1])


def test_processor_tag_separates_instruction_sets_and_ignores_order():
    assert compile_cache.processor_tag(INTEL) != compile_cache.processor_tag(AMD)
    reordered = INTEL.replace("fpu avx2 avx512f fma", "fma avx512f fpu avx2", 1)
    assert compile_cache.processor_tag(reordered) == compile_cache.processor_tag(INTEL)
    # only the first processor's block counts
    assert compile_cache.processor_tag(INTEL.split("\n\n")[0]) == compile_cache.processor_tag(INTEL)
    assert len(compile_cache.processor_tag(AMD)) == 12


def test_folder_names_jax_jaxlib_and_the_processor(tmp_path):
    name = compile_cache.folder(tmp_path).name
    assert name.startswith(f"jax-{jax.__version__}-jaxlib-") and name.endswith(compile_cache.processor_tag())


def test_prune_deletes_the_oldest_cache_files_and_nothing_else(tmp_path):
    old, new = tmp_path / "jax-0.1-jaxlib-0.1-aaaaaaaaaaaa", tmp_path / "jax-0.2-jaxlib-0.2-bbbbbbbbbbbb"
    old.mkdir()
    new.mkdir()
    files = [old / "a-cache", old / "a-atime", new / "b-cache", new / "c-cache"]
    for i, p in enumerate(files):
        p.write_bytes(b"x" * 100)
        os.utime(p, (1000 + i, 1000 + i))
    (old / "notes.txt").write_bytes(b"y" * 1000)           # not the cache's: kept
    (tmp_path / "elsewhere-cache").write_bytes(b"z" * 1000)  # not in a cache folder: kept
    assert compile_cache.prune(tmp_path, max_bytes=400) == 0
    assert compile_cache.prune(tmp_path, max_bytes=300) == 200   # down to 3/4 of 300: two oldest go
    assert [p.exists() for p in files] == [False, False, True, True]
    assert (old / "notes.txt").exists() and (tmp_path / "elsewhere-cache").exists()


@pytest.mark.parametrize("value", ["off", "OFF", "0", "false", "no", "none", "0.0", " 0e0 ", "-0", " off "])
def test_off_turns_it_off(value, jax_cache_setting):
    assert compile_cache.enable(environ={compile_cache.ENV: value}) is None
    assert jax.config.jax_compilation_cache_dir is None


def test_the_callers_own_jax_setting_is_kept(tmp_path, jax_cache_setting):
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "mine"))
    assert compile_cache.enable(environ={compile_cache.ENV: str(tmp_path / "other")}) == tmp_path / "mine"
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")
    assert not (tmp_path / "other").exists()


def test_the_callers_own_threshold_is_kept_and_otherwise_set(tmp_path, jax_cache_setting, monkeypatch):
    """A JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS the caller set (JAX read it at import) stays; without
    it the package's threshold is used."""
    monkeypatch.setenv(compile_cache.MIN_COMPILE_ENV, "2.5")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 2.5)
    assert compile_cache.enable(environ={compile_cache.ENV: str(tmp_path / "a")}) is not None
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 2.5
    monkeypatch.delenv(compile_cache.MIN_COMPILE_ENV)
    jax.config.update("jax_compilation_cache_dir", None)
    assert compile_cache.enable(environ={compile_cache.ENV: str(tmp_path / "b")}) is not None
    assert jax.config.jax_persistent_cache_min_compile_time_secs == compile_cache.MIN_COMPILE_SECONDS


def test_a_folder_others_may_write_to_is_refused_with_a_warning(tmp_path, jax_cache_setting):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.warns(UserWarning, match=f"{shared}.*others may write.*{compile_cache.ENV}"):
        assert compile_cache.enable(environ={compile_cache.ENV: str(shared)}) is None
    assert jax.config.jax_compilation_cache_dir is None


def test_an_unusable_folder_leaves_compilation_as_it_was(tmp_path, jax_cache_setting):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert compile_cache.enable(environ={compile_cache.ENV: str(blocker / "cache")}) is None
    assert jax.config.jax_compilation_cache_dir is None


def test_enable_uses_a_private_folder_per_processor(tmp_path, jax_cache_setting):
    got = compile_cache.enable(environ={compile_cache.ENV: str(tmp_path / "c")})
    assert got == compile_cache.folder(tmp_path / "c") and got.is_dir()
    assert jax.config.jax_compilation_cache_dir == str(got)
    assert (got.stat().st_mode & 0o777) == 0o700 and ((tmp_path / "c").stat().st_mode & 0o077) == 0


def test_the_variable_is_read_without_its_surrounding_spaces(tmp_path, jax_cache_setting):
    got = compile_cache.enable(environ={compile_cache.ENV: f"  {tmp_path / 'c'}\n"})
    assert got == compile_cache.folder(tmp_path / "c") and got.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == ["c"]


def test_default_folder_follows_xdg_cache_home(tmp_path):
    assert compile_cache.default_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "fedpne-jax" / "xla"


SCRIPT = textwrap.dedent("""
    import hashlib, sys
    import jax
    from jax import monitoring
    hits = []
    monitoring.register_event_listener(lambda name, **kw: hits.append(name) if name.endswith("/cache_hits") else None)
    import fedpne_jax as fp, objectives
    used = fp.enable_compile_cache()
    config = fp.FedPNEConfig(num_clients=3, horizon=2000, noise="gaussian:0.1")
    r = fp.run(config, objectives.make_objective("garland", 3), seeds=4)
    digest = hashlib.sha256(r.final_regret.tobytes() + r.curves.tobytes()).hexdigest()
    print(used is not None, len(hits), digest)
""")


def _process(env_value: str) -> list[str]:
    env = dict(os.environ, **{compile_cache.ENV: env_value}, PYTHONPATH=ROOT)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_a_second_process_loads_the_programs_and_computes_the_same_bits(tmp_path):
    cache = str(tmp_path / "cache")
    first, second, off = _process(cache), _process(cache), _process("off")
    # a process may load a program it compiled itself a moment before (two jits, one module)
    assert first[0] == second[0] == "True" and int(second[1]) > int(first[1])
    assert off[:2] == ["False", "0"]
    assert first[2] == second[2] == off[2]
    entries = list(compile_cache.folder(cache).glob("*-cache"))
    assert entries and all(time.time() - p.stat().st_mtime < 600 for p in entries)
