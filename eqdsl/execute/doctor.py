"""`eqdsl doctor`: what this machine offers eqdsl — packages, CPU, the CUDA GPU and toolkit — or
why something is missing. Contract: `report()` returns (label, value) rows and never raises."""
from __future__ import annotations

import importlib
import os
import platform
import sys

from eqdsl.execute.backends import processor


def _version(package: str) -> str:
    from importlib.metadata import version

    try:
        importlib.import_module(package)
        return version(package)
    except Exception as err:  # noqa: BLE001 - a report: any failure is the answer
        return f"not available ({type(err).__name__}: {err})"


OPTIONAL = (("tenseal", "qgym"), ("matplotlib", "sweep"), ("ray", "ray"), ("onnxslim", None), ("onnxsim", None))


def _installed(package: str, extra: str | None) -> str:
    """The installed version, read from the package's metadata (importing Ray takes seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed" + (f" (pip install 'eqdsl[{extra}]')" if extra else " (benchmarks only)")


def _cuda() -> list[tuple[str, str]]:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return [("CUDA", "the Numba CUDA simulator (NUMBA_ENABLE_CUDASIM=1): kernels run, timings mean nothing")]
    try:
        from numba import cuda
    except Exception as err:  # noqa: BLE001
        return [("CUDA", f"numba.cuda unavailable ({err}); install eqdsl[cuda]")]
    try:
        if not cuda.is_available():
            return [("CUDA", "no usable GPU or driver found (numba.cuda.is_available() is False)")]
        gpu = cuda.get_current_device()
        name = gpu.name.decode() if isinstance(gpu.name, bytes) else gpu.name
        driver = cuda.cudadrv.driver.driver.get_version()  # type: ignore[attr-defined]
        rows = [("CUDA device", f"{name}, compute capability {gpu.compute_capability}"),
                ("CUDA driver", ".".join(map(str, driver)))]
        rows.append(("CUDA runtime", ".".join(map(str, cuda.runtime.get_version()))))
        return rows
    except Exception as err:  # noqa: BLE001
        return [("CUDA", f"found but not usable: {type(err).__name__}: {err}")]


def report() -> list[tuple[str, str]]:
    rows = [("python", sys.version.split()[0]), ("processor", f"{processor()}, {os.cpu_count()} cores"),
            ("platform", platform.platform())]
    rows += [(p, _version(p)) for p in ("egglog", "ortools", "numba", "numpy", "onnx", "onnxruntime")]
    rows += [(p, _installed(p, extra)) for p, extra in OPTIONAL]
    try:
        import numba

        from eqdsl.kernels import fork_safe_threads

        fork_safe_threads()  # the layer eqdsl's parallel kernels use

        rows.append(("numba threading layer", str(numba.config.THREADING_LAYER)))  # type: ignore[attr-defined]
    except Exception as err:  # noqa: BLE001
        rows.append(("numba threading layer", f"unknown ({err})"))
    return rows + _cuda()
