#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs anvil's GPU tests and GPU benchmarks on a machine that has a GPU but no Debian -dev
# packages and no network (the lent H100/H200 machines: nvcc, CMake, PyTorch, no oneDNN,
# Google Benchmark or Catch2 to build against), by carrying a build made here.
#
#   here:        bash scripts/gpu_kit.sh pack [--with-fashion-mnist] [--with-mpi] [--allow-dirty]
#                  -> .gpukit/anvil-gpu-kit.tar.xz (10 MiB; 40 MiB with Fashion-MNIST; +3 MiB with MPI)
#   GPU machine: bash scripts/gpu_kit.sh run [--out DIR] [--tests-only] [--bench-only]
#                  [--dist | --dist-only]
#                  (from the repository root, with .gpukit/ carried along)
#   the GPU study, one part per call (issue 37; scripts/gpu_study.py says what each part runs):
#                bash scripts/gpu_kit.sh run --part tests|steps|layers|lstm|memory|peers|profile [--out DIR]
#                  [--models a,b] [--batches 16,32] [--reps 5] [--min-time 1.0] [--budget 540] [--no-compile]
#                  [--compile-only] [--dry-run]
#                  -> DIR/<part>/ (DIR default results/gpu-study; with --models/--batches/
#                  --compile-only a shard, DIR/<part>-<models>[-b<batches>][-compile]/), part.txt
#                  (kit revision, GPU, status),
#                  jobs.tsv and missing.txt; every job under `timeout` within --budget seconds
#                  (default 540: a 10-minute call with the kit's unpacking). --dry-run lists the
#                  jobs, their commands and time estimates, and needs neither a GPU nor the kit.
#   anywhere:    bash scripts/gpu_kit.sh report [DIR]  -> DIR/report.md from the part folders
#                  (scripts/gpu_study_report.py; no GPU; a missing part is named in it)
#
# pack refuses a working tree that differs from HEAD, and a build whose revision
# (build/generated/anvil_git_rev.h) is not HEAD's, unless --allow-dirty: KIT.txt then says
# "revision: <hash>+dirty". The revision is copied into every part's part.txt and the report.
#
# --with-mpi (scripts/gpu_kit_mpi.sh) also packs a relocatable copy of this machine's Open MPI
# 4.1.4 (mpirun, orted, libmpi, PMIx, hwloc, libevent, the MCA plugins except UCX, OFI, PSM,
# PSM2, openib and OpenSHMEM ones, help texts, parameter files; Note [Relocated Open MPI]),
# libanvil_mpi, anvil_dist_bench and test_dist_mpi. run --dist adds, after the
# other stages, the distributed stage into DIR/dist/ (--dist-only: that stage alone), bounded by
# ANVIL_GPU_DIST_BUDGET seconds (default 540), every mpirun under `timeout`, as root:
#   mpi_check.txt     test_dist_mpi on 2 ranks (collectives, data parallel = one process)
#   scaling/          scripts/dist_bench.sh --ranks ANVIL_GPU_DIST_RANKS (default 1,2,4,8,16),
#                     one rank per core (--bind-to core when the cores suffice), one thread per
#                     rank: the triad at each rank count, all-reduce sweeps to
#                     ANVIL_GPU_DIST_MAX_BYTES (64 MiB) in f32 and bf16, weak and strong steps of
#                     ANVIL_GPU_DIST_MODELS / _BATCHES (fcn5,alexnet,lstm32 at 64,16,128) with
#                     ANVIL_GPU_DIST_REPS (5) repetitions, the unfolded 1-rank and uncoupled-replica
#                     baselines, weak steps with bf16 buckets (ANVIL_GPU_DIST_DTYPES f32,bf16),
#                     after-backward runs at ANVIL_GPU_DIST_PLAIN_RANKS (2,16);
#                     scaling.md (scripts/dist_scaling_report.py), report.md (dist_report.py)
#   nccl_test.txt, nccl_allreduce*, nccl_train*: the NCCL single-GPU path under mpirun -np 1
#                     (test_cuda_runtime [nccl], the NCCL all-reduce sweep to 1 GiB, `anvil train
#                     --dist nccl --device cuda` when Fashion-MNIST is packed); without a GPU
#                     test_cuda_runtime must exit 77 and the rest is reported skipped
#   staged_test.txt   test_cuda_runtime [staged] under mpirun -np 2: host-staged collectives,
#                     both ranks on the one GPU (Note [Host-staged device collectives])
#   summary.txt       a "dist ..." line per step
#
# pack takes the CUDA-enabled Release build in ${ANVIL_BUILD_DIR:-build} (CMake's default
# flags: no -march=native, ISA-specific kernels are chosen at run time, so it runs on another
# x86-64 CPU), i.e. libanvil, libanvil_cuda, anvil_bench, the `anvil` tool and the three GPU
# test binaries, and the shared libraries they need that a CUDA image lacks (oneDNN, Google
# Benchmark, fmt, libgomp, OpenCL loader, zlib). cudart and cuBLAS are not packed: they come
# from the GPU machine's CUDA 13 (its toolkit or PyTorch's nvidia-* wheels).
#
# run unpacks the kit into .gpukit/, checks that every library resolves, and writes into DIR
# (default results/gpu-<date>):
#   nvidia-smi.txt, ldd.txt (cuDNN 9 comes from the toolkit's folder or PyTorch's nvidia/cudnn
#                     wheel; summary.txt names the one used)
#   test_cuda_runtime.txt, test_cuda_gemm.txt, test_cuda_lazy_load.txt,
#   test_cuda_pool_bn.txt  (Catch2 console output;
#                     the GPU tests: every CUDA variant against the CPU, training on both devices;
#                     every test case runs on its own under `timeout`, ANVIL_GPU_TEST_TIMEOUT
#                     seconds (default 120), so a hang fails that case and the rest still run)
#   test_*.cases.txt  one line per test case: exit status (or "timeout") | seconds | name
#   bench/            scripts/bench.sh --devices cuda: GPU GEMM variants x modes, remedies, the
#                     FCN/MLP steps over the GPU batch sweep, torch.mm and the PyTorch steps on the
#                     same GPU, report.md; the per-layer conv table gpu_conv_layers.md and the
#                     steps beside PyTorch gpu_steps.md (batch copied / resident, FP32 / TF32)
#   train_*.json      with --with-fashion-mnist packed: `anvil train` of mlp_mnist on real
#                     Fashion-MNIST on cuda and on the CPU (same seed)
#   summary.txt       one line per stage with its exit status
#   provenance.json   the run's machine, GPU, kit revision and time (scripts/provenance.py; every
#                     part folder and dist/ get one too)
# The exit status is non-zero when a test binary failed or a library did not resolve (on a
# machine without a GPU the GPU test binaries exit 77, "skipped"). CTest `gpu_kit` packs and runs
# the kit with --tests-only on every build that has the CUDA backend (tests/cuda/test_gpu_kit.sh);
# with the MPI backend too, it packs --with-mpi and runs --dist-only (2 ranks) with this machine's
# Open MPI hidden (gpu_kit_mpi.sh without-system-mpi).
# ANVIL_GPU_KIT_DIR moves .gpukit elsewhere.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/kit_libs.sh  # kit_copy_libs: which shared libraries the kit carries

kit_dir="${ANVIL_GPU_KIT_DIR:-.gpukit}"  # relative to the repository root, or absolute
kit="$kit_dir/anvil-gpu-kit.tar.xz"

# kit_revision BUILD: prints HEAD's short hash when the tracked files equal HEAD and BUILD's
# generated revision header names the same hash; else prints why not and returns 1.
kit_revision() {
  local head rev
  head=$(git rev-parse --short HEAD 2>/dev/null) || { echo "not a git checkout"; return 1; }
  git diff --quiet HEAD 2>/dev/null || { echo "the working tree differs from HEAD $head"; return 1; }
  rev=$(sed -n 's/^#define ANVIL_GIT_REV "\(.*\)"/\1/p' "$1/generated/anvil_git_rev.h" 2>/dev/null)
  [ "$rev" = "$head" ] || { echo "the build in $1 is of revision '${rev:-unknown}', HEAD is $head"; return 1; }
  echo "$head"
}

pack() {
  local with_data=0 with_mpi=0 allow_dirty=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --with-fashion-mnist) with_data=1; shift ;;
      --with-mpi) with_mpi=1; shift ;;
      --allow-dirty) allow_dirty=1; shift ;;
      *) echo "gpu_kit.sh pack: unknown option $1" >&2; exit 2 ;;
    esac
  done
  local build="${ANVIL_BUILD_DIR:-build}"
  # The revision the results will name: HEAD, clean, and the build made from it (the 2026-11-26
  # results said 76e0058+dirty where the README said 395253e).
  local revision build_rev
  revision=$(kit_revision "$build") || {
    [ "$allow_dirty" = 1 ] || { echo "gpu_kit.sh pack: $revision; commit first, rebuild," \
      "or pass --allow-dirty (the kit then says so)" >&2; exit 1; }
    echo "gpu_kit.sh pack: --allow-dirty: $revision" >&2
    revision="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)+dirty"
  }
  build_rev=$(sed -n 's/^#define ANVIL_GIT_REV "\(.*\)"/\1/p' "$build/generated/anvil_git_rev.h" 2>/dev/null)
  local files=(lib/libanvil_cuda.so bench/anvil_bench bin/anvil
               tests/cuda/test_cuda_runtime tests/cuda/test_cuda_gemm tests/cuda/test_cuda_lazy_load
               tests/cuda/test_cuda_pool_bn)
  for f in "${files[@]}"; do
    [ -e "$build/$f" ] || { echo "gpu_kit.sh pack: $build/$f is missing: build with CUDA first" \
      "(cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build $build)" >&2; exit 1; }
  done
  stage=$(mktemp -d)  # global: the EXIT trap runs after this function has returned
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/build/lib" "$stage/build/bench" "$stage/build/bin" "$stage/build/tests/cuda" "$stage/syslib"
  cp -a "$build"/lib/libanvil.so* "$build/lib/libanvil_cuda.so" "$stage/build/lib/"
  cp "$build/bench/anvil_bench" "$stage/build/bench/"
  cp "$build/bin/anvil" "$stage/build/bin/"
  cp "$build"/tests/cuda/test_cuda_{runtime,gemm,lazy_load,pool_bn} "$stage/build/tests/cuda/"
  # The libraries the binaries need, except the C/C++ runtime (newer on the GPU image) and CUDA's.
  kit_copy_libs "$stage/syslib" "" "$stage"/build/lib/*.so* "$stage"/build/bench/anvil_bench \
    "$stage"/build/bin/anvil "$stage"/build/tests/cuda/*
  if [ "$with_mpi" = 1 ]; then  # Open MPI and the MPI programs (scripts/gpu_kit_mpi.sh)
    bash scripts/gpu_kit_mpi.sh pack "$stage" "$build" || exit 1
  fi
  if [ "$with_data" = 1 ]; then
    local fm="${ANVIL_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
    [ -f "$fm/train-images-idx3-ubyte.gz" ] || { echo "gpu_kit.sh pack: no Fashion-MNIST in $fm" >&2; exit 1; }
    mkdir -p "$stage/data/fashion-mnist"
    cp "$fm"/*-ubyte.gz "$stage/data/fashion-mnist/"
  fi
  { echo "anvil GPU kit"; echo "packed: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)";
    echo "revision: $revision"; echo "build revision: ${build_rev:-unknown}"
    echo "commit: $(git rev-parse HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' (working tree differs)')";
    echo "build: $build"; echo "system libraries: $(ls "$stage/syslib" | tr '\n' ' ')"
    [ -f "$stage/mpi/MPI.txt" ] && cat "$stage/mpi/MPI.txt"; } > "$stage/KIT.txt"
  mkdir -p "$kit_dir"
  # ANVIL_GPU_KIT_XZ_LEVEL: xz's preset (default 6); CTest gpu_kit packs at 0, which is what it
  # times (the kit's contents, not its size, are what it checks).
  local level="${ANVIL_GPU_KIT_XZ_LEVEL:-6}"
  [[ "$level" =~ ^[0-9]$ ]] || { echo "gpu_kit.sh pack: ANVIL_GPU_KIT_XZ_LEVEL: 0 to 9, not '$level'" >&2; exit 2; }
  XZ_OPT="-T0 -$level" tar -C "$stage" -cJf "$kit" .
  cat "$stage/KIT.txt"
  echo "gpu_kit.sh pack: $kit ($(du -m "$kit" | cut -f1) MiB); carry $kit_dir to the GPU machine and run" \
       "'bash scripts/gpu_kit.sh run' there"
}

# run_cases BINARY LOG CASES: every Catch2 test case of BINARY on its own under `timeout`
# (ANVIL_GPU_TEST_TIMEOUT seconds, default 120), so a hang fails that case and the others still
# run. LOG gets the console output of all, CASES one line per case: "exit | seconds | name"
# (exit "timeout" when killed). Returns 0 when every case passed, 77 when the binary reports
# itself skipped (no GPU), else 1.
run_cases() {
  local bin=$1 log=$2 cases=$3 limit="${ANVIL_GPU_TEST_TIMEOUT:-120}" rc=0
  : > "$log"; : > "$cases"
  # Without a device the GPU binaries skip as a whole (exit 77) before running any case.
  timeout "$limit" "$bin" "[.none-such-tag]" < /dev/null >> "$log" 2>&1
  [ $? = 77 ] && return 77
  : > "$log"
  local name
  while IFS= read -r name; do
    [ -n "$name" ] || continue
    # Catch2's test spec: ',' '[' ']' and '\' are special; a backslash escapes them.
    local spec
    spec=$(printf '%s' "$name" | sed 's/[][,\\]/\\&/g')
    local t0=$SECONDS c
    if [ -n "${ANVIL_GPU_TEST_DEADLINE:-}" ] && [ $((SECONDS + limit)) -gt "$ANVIL_GPU_TEST_DEADLINE" ]; then
      echo "budget | 0 | $name" >> "$cases"  # not run: the part's budget could not hold its timeout
      rc=1
      continue
    fi
    timeout -k 10 "$limit" "$bin" --durations yes "$spec" < /dev/null >> "$log" 2>&1
    c=$?
    [ "$c" = 124 ] || [ "$c" = 137 ] && { echo "TIMEOUT after $limit s: $name" >> "$log"; c=timeout; }
    echo "$c | $((SECONDS - t0)) | $name" >> "$cases"
    [ "$c" = 0 ] || rc=1
  done < <("$bin" --list-test-names-only 2>/dev/null)
  local n failed
  n=$(wc -l < "$cases"); failed=$(grep -vc '^0 |' "$cases")
  [ "$n" -gt 0 ] || { echo "no test cases listed by $bin" >> "$log"; return 1; }
  if [ "$rc" = 0 ]; then echo "All tests passed ($n test cases, each run on its own)" >> "$log"
  else echo "test cases: $n | $((n - failed)) passed | $failed failed (each run on its own)" >> "$log"; fi
  return $rc
}

run() {
  local out="" tests=1 bench=1 dist=0 part="" dry_run=0 study_args=() budget=540 sub=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --out) out="$2"; shift 2 ;;
      --tests-only) bench=0; shift ;;
      --bench-only) tests=0; shift ;;
      --dist) dist=1; shift ;;
      --dist-only) tests=0; bench=0; dist=1; shift ;;
      --part) part="$2"; shift 2 ;;
      --dry-run) dry_run=1; shift ;;
      --budget) budget="$2"; study_args+=("$1" "$2"); shift 2 ;;
      # A part restricted to some models or batches is a shard: its own folder, <part>-<models>[-b<batches>].
      --models) study_args+=("$1" "$2"); sub="$sub-${2//,/_}"; shift 2 ;;
      --batches) study_args+=("$1" "$2"); sub="$sub-b${2//,/_}"; shift 2 ;;
      --reps|--min-time) study_args+=("$1" "$2"); shift 2 ;;
      --no-compile) study_args+=("$1"); shift ;;
      --compile-only) study_args+=("$1"); sub="$sub-compile"; shift ;;
      *) echo "gpu_kit.sh run: unknown option $1" >&2; exit 2 ;;
    esac
  done
  if [ -n "$part" ]; then
    case "$part" in tests|steps|layers|lstm|memory|peers|profile) ;;
      *) echo "gpu_kit.sh run: --part: tests, steps, layers, lstm, memory, peers or profile, not '$part'" >&2; exit 2 ;; esac
    [[ "$budget" =~ ^[1-9][0-9]*$ ]] || { echo "gpu_kit.sh run: --budget: whole seconds, not '$budget'" >&2; exit 2; }
    out="${out:-results/gpu-study}"
    sub="$part$sub"
    # The plan needs neither the kit nor a GPU (scripts/gpu_study.py plan).
    if [ "$dry_run" = 1 ]; then
      python3 scripts/gpu_study.py plan --part "$part" --out "$out/$sub" \
        --bench "$kit_dir/root/build/bench/anvil_bench" "${study_args[@]}"
      return $?
    fi
  elif [ "$dry_run" = 1 ] || [ "${#study_args[@]}" -gt 0 ]; then
    echo "gpu_kit.sh run: --dry-run, --models, --batches, --reps, --budget and --*compile* go with --part" >&2; exit 2
  fi
  out="${out:-results/gpu-$(date +%Y%m%d-%H%M%S)}"
  [ -f "$kit" ] || { echo "gpu_kit.sh run: no $kit (make it with 'gpu_kit.sh pack' and carry $kit_dir)" >&2; exit 2; }
  local root
  root="$(cd "$kit_dir" && pwd)/root"  # absolute: LD_LIBRARY_PATH and bench.sh take it from anywhere
  rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xJf "$kit" || exit 1
  local part_t0=$SECONDS
  if [ -n "$part" ]; then  # the setup below logs into the part's folder (a rerun replaces it)
    out="$out/$sub"
    rm -rf "$out"; mkdir -p "$out"
    tests=0; bench=0; dist=0
    [ "$part" = tests ] && tests=1
  fi
  mkdir -p "$out"
  local summary="$out/summary.txt" status=0
  : > "$summary"
  note() { echo "$*" | tee -a "$summary"; }
  cat "$root/KIT.txt" | tee -a "$summary"
  # This copy of the tree may have no .git: the JSON the run's Python writers make (the peers,
  # gpu_study.py) names the kit's revision, and provenance.json the machine (Note [Provenance]).
  ANVIL_GIT_REVISION="$(sed -n 's/^revision: //p' "$root/KIT.txt")"
  export ANVIL_GIT_REVISION
  if python3 scripts/provenance.py --out "$out/provenance.json"; then note "provenance: $out/provenance.json"
  else note "provenance: FAIL (scripts/provenance.py)"; status=1; fi

  # cudart, cuBLAS 13 and cuDNN 9 of the machine: the toolkit's, else PyTorch's nvidia-* wheels
  # (the H100 machine has cuDNN only in /opt/torch/.venv/.../site-packages/nvidia/cudnn/lib).
  # NCCL too (dlopen()ed by the nccl communicator: Note [Lazy NCCL loading]).
  local cuda_dirs=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib \
           $(python3 - 2>/dev/null <<'PY'
import importlib, os
for mod in ("nvidia.cublas", "nvidia.cuda_runtime", "nvidia.cu13", "nvidia.cudnn", "nvidia.nccl"):
    try:
        m = importlib.import_module(mod)
    except Exception:
        continue
    for base in getattr(m, "__path__", []):
        for sub in ("lib", "lib64"):
            if os.path.isdir(os.path.join(base, sub)):
                print(os.path.join(base, sub))
PY
); do
    [ -d "$d" ] && case ":$cuda_dirs:" in *":$d:"*) ;; *) cuda_dirs="$cuda_dirs:$d" ;; esac
  done
  export LD_LIBRARY_PATH="$root/build/lib:$root/syslib${cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -d "$root/mpi/lib" ] && LD_LIBRARY_PATH="$root/mpi/lib:$LD_LIBRARY_PATH"  # pack --with-mpi
  note "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
  note "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi failed')"

  ldd "$root"/build/lib/*.so* "$root"/build/bench/anvil_bench "$root"/build/bin/anvil "$root"/build/tests/cuda/* \
    > "$out/ldd.txt" 2>&1
  if grep -q "not found" "$out/ldd.txt"; then
    note "FAIL: libraries not found: $(grep "not found" "$out/ldd.txt" | awk '{print $1}' | sort -u | tr '\n' ' ')"
    return 1
  fi
  note "libraries: all resolve ($out/ldd.txt)"
  # Which cuDNN the backend loads (libcudnn.so.9 dlopens its engine libraries from its folder).
  local cudnn
  cudnn=$(awk '$1 == "libcudnn.so.9" && $2 == "=>" {print $3; exit}' "$out/ldd.txt")
  if [ -n "$cudnn" ]; then
    note "cuDNN: $cudnn -> $(basename "$(readlink -f "$cudnn")") ($(ls "$(dirname "$cudnn")"/libcudnn*.so.9 2>/dev/null | wc -l) libcudnn*.so.9 in its folder)"
  else
    note "cuDNN: not linked"
  fi
  # NCCL is dlopen()ed by --dist nccl (Note [Lazy NCCL loading]), so ldd does not show it.
  local nccl_lib="" d
  for d in ${LD_LIBRARY_PATH//:/ }; do
    [ -z "$nccl_lib" ] && [ -e "$d/libnccl.so.2" ] && nccl_lib="$d/libnccl.so.2"
  done
  note "NCCL: ${nccl_lib:-libnccl.so.2 not on LD_LIBRARY_PATH (--dist nccl will refuse)}"
  note "$("$root/build/tests/cuda/test_cuda_runtime" --anvil-skip-reason)"

  if [ "$tests" = 1 ]; then
    # --part tests: no test binary starts after the budget (run_cases stops between cases too).
    [ -n "$part" ] && export ANVIL_GPU_TEST_DEADLINE=$((part_t0 + budget))
    for t in test_cuda_lazy_load test_cuda_gemm test_cuda_runtime test_cuda_pool_bn; do
      local t0=$SECONDS rc
      run_cases "$root/build/tests/cuda/$t" "$out/$t.txt" "$out/$t.cases.txt"
      rc=$?
      note "$t: exit $rc in $((SECONDS - t0)) s; $(grep -E '^(All tests passed|test cases:)' "$out/$t.txt" | tail -1)$(
        grep -c '^timeout |' "$out/$t.cases.txt" 2>/dev/null | sed '/^0$/d; s/$/ test case(s) TIMED OUT (see '"$t"'.cases.txt)/; s/^/; /')"
      [ "$rc" = 0 ] || status=1
    done
  fi

  if [ "$bench" = 1 ]; then
    local t0=$SECONDS rc
    # ANVIL_CUDNN_LOG=1: bench.log gets one line per cuDNN algorithm search of cuda.cudnn (the
    # problem, the algorithm chosen, every candidate's time or status).
    ANVIL_CUDNN_LOG=1 ANVIL_BUILD_DIR="$root/build" bash scripts/bench.sh --devices cuda --no-install --no-build --peers pytorch \
      --out "$out/bench" > "$out/bench.log" 2>&1
    rc=$?
    note "bench.sh --devices cuda: exit $rc in $((SECONDS - t0)) s ($out/bench/report.md)"
    for f in gpu_conv_layers.md gpu_steps.md; do  # scripts/report_gpu_conv.py, report_gpu_steps.py
      [ -f "$out/bench/$f" ] && note "  $out/bench/$f"
    done
    note "  cuda.cudnn's algorithm searches: $(grep -c '^cuda.cudnn: ' "$out/bench.log") lines in $out/bench.log"
    [ "$rc" = 0 ] || status=1
    if [ -f "$root/data/fashion-mnist/train-images-idx3-ubyte.gz" ]; then
      for dev in cuda cpu; do
        t0=$SECONDS
        "$root/build/bin/anvil" train --model mlp_mnist --dataset "$root/data/fashion-mnist" --device "$dev" \
          --epochs 2 --optimizer adam --lr 1e-3 --seed 1 --json-log "$out/train_mlp_mnist_$dev.json" \
          > "$out/train_mlp_mnist_$dev.txt" 2>&1
        rc=$?
        note "anvil train mlp_mnist on $dev: exit $rc in $((SECONDS - t0)) s;" \
             "$(grep -E 'test accuracy|training time' "$out/train_mlp_mnist_$dev.txt" | tr -s ' ' | tr '\n' ';')"
        [ "$rc" = 0 ] || status=1
      done
    fi
  fi
  if [ "$dist" = 1 ]; then  # scripts/gpu_kit_mpi.sh: MPI check, CPU scaling, NCCL on one GPU
    local t0=$SECONDS
    bash scripts/gpu_kit_mpi.sh run "$root" "$out" || status=1
    note "dist stage: $((SECONDS - t0)) s ($out/dist)"
  fi
  if [ -n "$part" ] && [ "$part" != tests ]; then  # scripts/gpu_study.py: the part's jobs
    PYTHONUNBUFFERED=1 python3 scripts/gpu_study.py run --part "$part" --out "$out" \
      --bench "$root/build/bench/anvil_bench" --budget $((budget - (SECONDS - part_t0))) \
      "${study_args[@]}" 2>&1 | tee -a "$summary"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  fi
  if [ -n "$part" ]; then  # what the report needs to name this part's origin
    { echo "part: $part"; echo "revision: $(sed -n 's/^revision: //p' "$root/KIT.txt")"
      echo "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
      echo "seconds: $((SECONDS - part_t0))"; echo "status: $status"
      echo "command: gpu_kit.sh run --part $part ${study_args[*]}"; } > "$out/part.txt"
    cp "$root/KIT.txt" "$out/KIT.txt"
  fi
  note "gpu_kit.sh run: done, status $status ($out)"
  return $status
}

report() {  # report [DIR]: DIR/report.md from the part folders; no GPU, no kit
  local dir="${1:-results/gpu-study}"
  [ -d "$dir" ] || { echo "gpu_kit.sh report: no folder $dir" >&2; exit 2; }
  # The plot needs matplotlib, which Debian installs for /usr/bin/python3 (a python3 earlier on
  # the PATH may lack it; bench.sh picks the same way).
  local py=python3 cand
  for cand in python3 /usr/bin/python3; do
    if "$cand" -c 'import matplotlib' 2>/dev/null; then py=$cand; break; fi
  done
  "$py" scripts/gpu_study_report.py "$dir" > "$dir/report.md" || exit 1
  echo "gpu_kit.sh report: $dir/report.md"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  report) shift; report "$@" ;;
  *) sed -n '3,77p' "$0"; exit 2 ;;
esac
