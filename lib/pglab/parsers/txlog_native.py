"""A loop numba compiled, kept on disk as machine code and loaded with llvmlite alone: no numba import.

Why: ``pglab parse`` on a 256 MB ``-l`` log is a whole process, and numba's import with the loading
of its cached loop took about 1.5 s of it (scipy included) for a parse of 0.25 s. numba's own code
generator, llvmlite (a dependency of numba), imports and loads an object file in 0.04-0.08 s. So numba compiles
the loop once, as a C callback (``cfunc``); its LLVM IR is turned into an object file for this CPU and
kept beside this module (``__pycache__``, else the user's cache folder); later processes load that
file into llvmlite's MCJIT and call the loop through ctypes, which releases the GIL as numba's
``nogil`` did. The machine code is what numba makes of the loop: the same numbers.

The C callback's wrapper has a path that turns an exception of the loop into a Python error through
numba's runtime (not loaded here). The loop raises nothing (no raise, no division by a variable, no
bounds checks), so that path is dead; its calls into numba's runtime and Python's C API are replaced
by traps (the process would stop on SIGILL rather than call a missing function) and the object then
refers to nothing outside itself but the C library. A file is keyed by the loop's source, this module's,
llvmlite's version (numba pins its llvmlite) and the CPU, and is checked on a known line when loaded.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_MAGIC = b"pglab-native 2\n"
# The engines of loaded objects: their machine code lives as long as they do.
_ENGINES: list[Any] = []


def _llvm() -> Any:
    """llvmlite's binding, with the native target ready."""
    import llvmlite.binding as ll

    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    return ll


def _key(ll: Any, name: str, sources: Sequence[Path]) -> bytes:
    """What the machine code depends on: the sources, the code generator, the CPU. Kept whole in the file and
    compared byte for byte (no hash to import: hashlib's OpenSSL costs 4 ms of a 0.5 s command)."""
    import llvmlite

    parts = [name, llvmlite.__version__, platform.machine(), ll.get_host_cpu_name(),
             ll.get_host_cpu_features().flatten()]
    return b"\0".join([p.encode() for p in parts] + [src.read_bytes() for src in (*sources, Path(__file__))])


def _cache_dirs(module_file: Path) -> list[Path]:
    """Where an object file may be kept, as numba keeps its cache: beside the module, else per user."""
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pglab"
    return [module_file.parent / "__pycache__", user]


def _read(path: Path, key: bytes) -> tuple[str, bytes] | None:
    """(symbol, object code) kept in ``path`` for ``key``; None when absent or kept for another key."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = _MAGIC + b"%d\n" % len(key) + key
    if not data.startswith(head) or b"\n" not in data[len(head):]:
        return None
    symbol, _, obj = data[len(head):].partition(b"\n")
    return symbol.decode(), obj


def _write(dirs: list[Path], file_name: str, key: bytes, symbol: str, obj: bytes) -> None:
    """Atomically, in the first folder that takes it (none: compiled again next time)."""
    import tempfile

    for d in dirs:
        try:
            d.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{file_name}.")
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o644)
                f.write(_MAGIC + b"%d\n" % len(key) + key + symbol.encode() + b"\n" + obj)
            os.replace(tmp, d / file_name)
            return
        except OSError:
            continue


def _stub_runtime(ir: str) -> str:
    """``ir`` with every external function (but LLVM's intrinsics) defined as a trap and every external
    global defined: only the wrapper's exception path uses them (see the module's docstring)."""
    def trap(m: re.Match[str]) -> str:
        return f"define internal {m[1]} @{m[2]}({m[3]}) {{\n  call void @llvm.trap()\n  unreachable\n}}"

    ir = re.sub(r"^declare (.*?) @((?!llvm\.)[\w.$]+)\(([^)]*)\).*$", trap, ir, flags=re.M)
    ir = re.sub(r"^(@[\w.$]+) = external global (\S+)$", r"\1 = internal global \2 zeroinitializer", ir,
                flags=re.M)
    return ir + "\ndeclare void @llvm.trap()\n"


def _compile(ll: Any, build: Callable[[], Any]) -> tuple[str, bytes]:
    """numba's C callback (``build()``) as an object file for this CPU, with numba's JIT settings."""
    cb = build()
    mod = ll.parse_assembly(_stub_runtime(cb.inspect_llvm()))
    mod.verify()
    left = [f.name for f in mod.functions if f.is_declaration and not f.name.startswith("llvm.")]
    left += [g.name for g in mod.global_variables if g.is_declaration]
    if left:
        raise RuntimeError(f"the compiled loop still refers to {left}")
    target = ll.Target.from_default_triple()
    tm = target.create_target_machine(cpu=ll.get_host_cpu_name(), features=ll.get_host_cpu_features().flatten(),
                                      opt=3, reloc="static" if target.name.startswith("x86") else "default",
                                      codemodel="jitdefault", jit=True)
    return cb.native_name, tm.emit_object(mod)


def load(name: str, build: Callable[[], Any], sources: Sequence[Path], argtypes: Sequence[Any]) -> Any:
    """The C function numba's C callback ``build()`` compiles, as a ctypes function of ``argtypes`` (no
    result): from the object file kept for ``sources`` on this machine, else compiled (numba imported,
    seconds) and kept. ImportError when llvmlite, or numba to compile, is missing."""
    ll = _llvm()
    key = _key(ll, name, sources)
    file_name = f"{name}.{zlib.crc32(key):08x}.o"
    dirs = _cache_dirs(Path(sources[0]))
    got = next((g for g in (_read(d / file_name, key) for d in dirs) if g), None)
    if got is None:
        got = _compile(ll, build)
        _write(dirs, file_name, key, *got)
    symbol, obj = got
    tm = ll.Target.from_default_triple().create_target_machine()
    engine = ll.create_mcjit_compiler(ll.parse_assembly(""), tm)
    engine.add_object_file(ll.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    address = engine.get_function_address(symbol)
    if not address:
        raise RuntimeError(f"{symbol} is not in {file_name}")
    _ENGINES.append(engine)
    return ctypes.CFUNCTYPE(None, *argtypes)(address)
