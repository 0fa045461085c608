#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch peer's configuration fallbacks (Note [Peer fallbacks], bench/peers/pytorch_setup.py)
and its parameter/FLOP count, without torch (CI has none).

    test_peer_config.py PYTORCH_MODELS_PY        (CTest: peer_config_fallback, tests/CMakeLists.txt)

effective_config() gets a library finder and a shim probe as parameters, so the machines the
peer must survive are simulated here: no tcmalloc (the lent GPU machines), neither tcmalloc nor
jemalloc, no C compiler for the MKL shim. Each must give a configuration child_env() accepts,
with what was requested and each fallback recorded. model_params_and_flops() is checked on
stand-in modules: it counts a dense model and refuses a converted one (no nn.Linear, no
parameters), which is what reported 0 FLOPs and 0 parameters before.
"""
import importlib.util
import sys
import types

from checks import FAILURES, check, finish  # noqa: E402  (beside this file)


def main():
    spec = importlib.util.spec_from_file_location("pytorch_models", sys.argv[1])
    P = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(P)
    check("torch" not in sys.modules, "importing the peer module must not import torch")

    preset = dict(P.PRESET)
    libs_all = {P.TCMALLOC: "/x/libtcmalloc_minimal.so.4", P.JEMALLOC: "/x/libjemalloc.so.2"}
    shim_ok = lambda: (True, "")  # noqa: E731
    shim_no = lambda: (False, "the MKL shim needs gcc (apt-get install gcc)")  # noqa: E731

    # Everything there: the configuration is left as it is, nothing recorded.
    eff = P.effective_config(preset, find=libs_all.get, shim=shim_ok)
    check(eff == preset, f"all available: unchanged, got {eff}")

    # No tcmalloc, jemalloc there: jemalloc with retention (the next allocator that keeps blocks).
    eff = P.effective_config(preset, find={P.JEMALLOC: "/x/libjemalloc.so.2"}.get, shim=shim_ok)
    check(eff["allocator"] == "jemalloc_retain", f"no tcmalloc -> jemalloc_retain, got {eff['allocator']}")
    check(eff["requested"] == {"mkl": "shim", "allocator": "tcmalloc"}, f"requested {eff.get('requested')}")
    check(len(eff["fallbacks"]) == 1 and "libtcmalloc_minimal.so.4 not found" in eff["fallbacks"][0],
          f"fallback recorded: {eff.get('fallbacks')}")
    check(eff["mkl"] == "shim", "the shim stays when it builds")

    # The GPU machines: no allocator library, no compiler. glibc without mmap, MKL's default.
    eff = P.effective_config(preset, find=lambda lib: None, shim=shim_no)
    check(eff["allocator"] == "glibc_nommap" and eff["mkl"] == "default",
          f"bare machine -> glibc_nommap + default MKL, got {eff['allocator']} / {eff['mkl']}")
    check(len(eff["fallbacks"]) == 2 and any("gcc" in f for f in eff["fallbacks"]),
          f"both fallbacks recorded with their reason: {eff.get('fallbacks')}")
    check(all(k in eff for k in ("omp_wait_policy", "sgd", "inference", "flush_denormal")),
          "the rest of the configuration is kept")
    check(preset == P.PRESET, "the caller's configuration is not modified")
    # Applying it twice records nothing new (run_main and the probes may both apply it).
    again = P.effective_config(eff, find=lambda lib: None, shim=shim_no)
    check(again["fallbacks"] == eff["fallbacks"] and again["requested"] == eff["requested"],
          f"idempotent: {again.get('fallbacks')}")
    # child_env() accepts it: nothing to preload, glibc told not to mmap, threads set.
    env = P.child_env(eff, 2)
    check("LD_PRELOAD" not in env, f"no preload on a bare machine: {env.get('LD_PRELOAD')}")
    check(env.get("MALLOC_MMAP_MAX_") == "0" and env.get("OMP_NUM_THREADS") == "2",
          "glibc_nommap's environment and the thread count")
    # ...while the requested configuration itself cannot run there (what happened on the GPU
    # machine: "allocator libtcmalloc_minimal.so.4 not found"), when the library is really absent.
    if not P.find_library(P.TCMALLOC):
        try:
            P.child_env(dict(preset, mkl="default"), 1)
            check(False, "child_env ran tcmalloc without the library")
        except RuntimeError as e:
            check("not found" in str(e), f"child_env's error: {e}")

    # The shim with an environment keeps its environment without the shim.
    eff = P.effective_config(dict(preset, mkl="shim+enable_avx512"), find=libs_all.get, shim=shim_no)
    check(eff["mkl"] == "enable_avx512", f"shim+enable_avx512 -> enable_avx512, got {eff['mkl']}")

    # Unknown settings are an error, not a silent default.
    for bad in ({"allocator": "mimalloc"}, {"mkl": "magic"}):
        try:
            P.effective_config(dict(preset, **bad), find=libs_all.get, shim=shim_ok)
            check(False, f"{bad} accepted")
        except ValueError as e:
            check("effective_config" in str(e), f"{bad}: {e}")

    # One peak: a given peak is used as given; pct_peak is None without one.
    check(P.resolve_peak(113.5) == (113.5, "given with --peak"), "resolve_peak(given)")
    a = types.SimpleNamespace(peak=100.0, threads=2)
    check(abs(P.pct_of_peak(100e9, 1.0, a) - 50.0) < 1e-9, "pct_of_peak: 100 GFLOP/s of 2 x 100")
    check(P.pct_of_peak(100e9, 1.0, types.SimpleNamespace(peak=0.0, threads=1)) is None, "no peak: None")

    # Parameters and FLOPs on stand-ins for torch.nn: counted on the dense model; a model whose
    # Linear layers were converted (to_mkldnn) has neither and is refused, not counted as 0.
    class Linear:
        def __init__(self, i, o):
            self.in_features, self.out_features = i, o

    class Param:
        def __init__(self, n):
            self.n = n

        def numel(self):
            return self.n

    class Net(list):
        def parameters(self):
            return [Param(m.in_features * m.out_features + m.out_features) for m in self if isinstance(m, Linear)]

    fake_torch = types.SimpleNamespace(nn=types.SimpleNamespace(Linear=Linear))
    params, flops = P.model_params_and_flops(fake_torch, Net([Linear(10, 20), object(), Linear(20, 5)]), 4)
    check(params == 10 * 20 + 20 + 20 * 5 + 5 and flops == 2.0 * 4 * (10 * 20 + 20 * 5),
          f"dense model: {params} parameters, {flops} FLOPs")
    try:
        P.model_params_and_flops(fake_torch, Net([object(), object()]), 4)
        check(False, "a converted model (no nn.Linear) was counted")
    except RuntimeError as e:
        check("before the mkldnn conversion" in str(e), f"converted model: {e}")

    sys.exit(finish("pytorch_models.py configuration fallbacks: all checks passed"))


if __name__ == "__main__":
    main()
