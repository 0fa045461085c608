#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The distributed part of the GPU kit (scripts/gpu_kit.sh pack --with-mpi, run --dist): packs a
# relocatable copy of this machine's Open MPI (Debian 12, 4.1.4, with its PMIx, hwloc and libevent)
# and the MPI programs, and on the GPU machine (no Open MPI there) runs the MPI checks, CPU
# data-parallel scaling and the NCCL single-GPU path from the kit, in a bounded time.
#   gpu_kit_mpi.sh pack STAGE BUILD   (called by gpu_kit.sh pack; STAGE is the kit's root)
#   gpu_kit_mpi.sh env ROOT           (prints the environment that makes ROOT/mpi work, as `export`)
#   gpu_kit_mpi.sh run ROOT OUT       (called by gpu_kit.sh run; appends to OUT/summary.txt)
#   gpu_kit_mpi.sh without-system-mpi COMMAND...  (COMMAND with this machine's Open MPI hidden:
#                                      the check that the kit needs none, docs/cuda.md)
# Relocation (Note [Relocated Open MPI]) and the environment of `run`: see the header of
# gpu_kit.sh and docs/cuda.md's GPU-kit section.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/kit_libs.sh"  # kit_copy_libs: which shared libraries the kit carries

# Note [Relocated Open MPI]
# Open MPI finds its plugins, help texts and parameter files through its install directories, which
# Debian configured outside one prefix (libdir /usr/lib/x86_64-linux-gnu/openmpi/lib, pkglibdir
# .../openmpi/lib/openmpi3, pkgdatadir /usr/share/openmpi, sysconfdir /etc/openmpi). OPAL_PREFIX
# alone only moves the directories configured relative to the prefix, so every one is set on its
# own (opal/mca/installdirs/env reads OPAL_PREFIX, OPAL_BINDIR, OPAL_LIBDIR, OPAL_PKGLIBDIR,
# OPAL_DATADIR, OPAL_PKGDATADIR, OPAL_SYSCONFDIR, ...), and the same for the external PMIx 4.2
# (PMIX_PREFIX, PMIX_LIBDIR, PMIX_PKGLIBDIR, PMIX_PKGDATADIR, PMIX_SYSCONFDIR; Debian's
# pmix-mca-params.conf names its plugin folder absolutely, so PMIX_MCA_mca_base_component_path
# too). The kit's layout, under mpi/: bin (orterun = mpirun = mpiexec, orted, ompi_info),
# lib (libmpi, libopen-rte, libopen-pal, libmca_common_*, libpmix, libhwloc, libevent*, libudev,
# libz, libmunge), lib/openmpi (MCA plugins), lib/pmix (PMIx plugins), share/openmpi and
# share/pmix (help-*.txt), etc (openmpi-mca-params.conf, openmpi-default-hostfile,
# pmix-mca-params.conf). Left out: the plugins that need UCX, libfabric (ofi), PSM/PSM2, verbs
# (openib), netlink (reachable_netlink) or OpenSHMEM, i.e. network transports a one-node run does
# not use (libucp/uct/ucs/ucm, libfabric, libpsm*, libibverbs, librdmacm, libnl, libefa); the
# parameter file selects pml ob1 and btl self,vader so nothing looks for them. hwloc's own
# plugins (PCI, OpenCL, XML) are left out too: HWLOC_PLUGINS_PATH points at an empty folder, so
# the GPU machine's hwloc plugins (if any) are not mixed in either.

# Plugins left out of the kit (by the libraries they need) and their frameworks' exclusions.
kExcludedLibs='libuc[mpst]|libpsm|libinfinipath|libibverbs|librdmacm|libnl-|libfabric|libefa|liboshmem|libmca_common_(ucx|ofi|verbs)'

pack_mpi() {
  local stage=$1 build=$2
  local m="$stage/mpi" sys=/usr/lib/x86_64-linux-gnu
  local pkglib=$sys/openmpi/lib/openmpi3 pmixlib=$sys/pmix2/lib/pmix
  for f in /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$sys/libmpi.so.40" "$pkglib" "$pmixlib" \
           /usr/share/openmpi "$sys/pmix2/share/pmix" /etc/openmpi/openmpi-mca-params.conf; do
    [ -e "$f" ] || { echo "gpu_kit_mpi.sh pack: $f is missing: install Debian's openmpi-bin and libopenmpi-dev" \
      "(scripts/install_deps.sh)" >&2; return 1; }
  done
  local files=(lib/libanvil_mpi.so bench/distributed/anvil_dist_bench tests/distributed/test_dist_mpi)
  for f in "${files[@]}"; do
    [ -e "$build/$f" ] || { echo "gpu_kit_mpi.sh pack: $build/$f is missing: build it first" \
      "(cmake --build $build --target anvil_mpi anvil_dist_bench test_dist_mpi)" >&2; return 1; }
  done
  mkdir -p "$m/bin" "$m/lib/openmpi" "$m/lib/pmix" "$m/share/openmpi" "$m/share/pmix" "$m/etc" \
           "$stage/build/bench/distributed" "$stage/build/tests/distributed"
  cp "$build/lib/libanvil_mpi.so" "$stage/build/lib/"
  cp "$build/bench/distributed/anvil_dist_bench" "$stage/build/bench/distributed/"
  cp "$build/tests/distributed/test_dist_mpi" "$stage/build/tests/distributed/"
  cp /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$m/bin/"
  ln -s orterun "$m/bin/mpirun"
  ln -s orterun "$m/bin/mpiexec"
  local p left_out=()
  for p in "$pkglib"/mca_*.so; do
    if ldd "$p" | awk '{print $1}' | grep -Eq "^($kExcludedLibs)"; then
      left_out+=("$(basename "$p" .so)")
    else
      cp "$p" "$m/lib/openmpi/"
    fi
  done
  cp "$pmixlib"/*.so "$m/lib/pmix/"
  cp /usr/share/openmpi/help-*.txt "$m/share/openmpi/"
  cp "$sys"/pmix2/share/pmix/help-*.txt "$m/share/pmix/"
  cp /etc/openmpi/openmpi-default-hostfile "$m/etc/" 2>/dev/null || : > "$m/etc/openmpi-default-hostfile"
  # The libraries of all of it, except the C runtime and what the main kit already packs in syslib/.
  kit_copy_libs "$m/lib" "$stage/syslib" "$m"/bin/orterun "$m"/bin/orted "$m"/bin/ompi_info \
    "$m"/lib/openmpi/*.so "$m"/lib/pmix/*.so "$stage"/build/lib/libanvil_mpi.so \
    "$stage"/build/bench/distributed/* "$stage"/build/tests/distributed/*
  # libmpi's and the plugins' own libraries are found through LD_LIBRARY_PATH; check none is missing.
  if LD_LIBRARY_PATH="$m/lib:$stage/syslib:$stage/build/lib" ldd "$m"/bin/* "$m"/lib/openmpi/*.so \
       "$m"/lib/pmix/*.so "$stage"/build/lib/libanvil_mpi.so 2>&1 | grep -q "not found"; then
    echo "gpu_kit_mpi.sh pack: unresolved libraries in the packed Open MPI" >&2; return 1
  fi
  # Debian's parameters (which turn off ofi, openib, uct and ucx), then the kit's: one node,
  # shared memory, no network transports (their plugins are not packed).
  { grep -v '^#' /etc/openmpi/openmpi-mca-params.conf | grep -v '^[[:space:]]*$'
    echo "# anvil GPU kit (scripts/gpu_kit_mpi.sh): one node over shared memory; UCX, OFI, PSM,"
    echo "# PSM2, openib and OpenSHMEM plugins are not packed."
    echo "pml = ob1"
    echo "btl = self,vader"
    echo "mtl = ^ofi,psm,psm2"
    echo "osc = ^ucx"; } > "$m/etc/openmpi-mca-params.conf"
  # PMIx's file names its plugin folder absolutely (Debian's path); the kit's does not.
  echo "# anvil GPU kit: plugins from PMIX_PKGLIBDIR (gpu_kit_mpi.sh env)" > "$m/etc/pmix-mca-params.conf"
  { echo "Open MPI: $(dpkg-query -W -f='${Version}' libopenmpi3 2>/dev/null) (Debian), PMIx $(dpkg-query -W -f='${Version}' libpmix2 2>/dev/null)"
    echo "MCA plugins left out (need UCX, libfabric, PSM, verbs, netlink or OpenSHMEM): ${left_out[*]}"
    echo "MPI libraries: $(cd "$m/lib" && ls *.so* | tr '\n' ' ')"; } > "$m/MPI.txt"
  echo "gpu_kit_mpi.sh pack: Open MPI $(du -sm "$m" | cut -f1) MiB unpacked, $(ls "$m"/lib/openmpi | wc -l) MCA plugins;" \
       "left out: ${left_out[*]}"
}

# The environment that makes ROOT/mpi work from any folder (Note [Relocated Open MPI]).
mpi_env() {
  local m="$1/mpi"
  cat <<EOF
export OPAL_PREFIX="$m" OPAL_EXEC_PREFIX="$m" OPAL_BINDIR="$m/bin" OPAL_SBINDIR="$m/bin"
export OPAL_LIBEXECDIR="$m/bin" OPAL_LIBDIR="$m/lib" OPAL_PKGLIBDIR="$m/lib/openmpi"
export OPAL_DATAROOTDIR="$m/share" OPAL_DATADIR="$m/share" OPAL_PKGDATADIR="$m/share/openmpi"
export OPAL_SYSCONFDIR="$m/etc" OPAL_INCLUDEDIR="$m/include"
export PMIX_PREFIX="$m" PMIX_EXEC_PREFIX="$m" PMIX_BINDIR="$m/bin" PMIX_LIBDIR="$m/lib"
export PMIX_PKGLIBDIR="$m/lib/pmix" PMIX_DATADIR="$m/share" PMIX_PKGDATADIR="$m/share/pmix"
export PMIX_SYSCONFDIR="$m/etc" PMIX_MCA_mca_base_component_path="$m/lib/pmix"
export HWLOC_PLUGINS_PATH="$m/lib/hwloc"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH="$m/bin:\$PATH"
case ":\${LD_LIBRARY_PATH:-}:" in *":$m/lib:"*) ;; *) export LD_LIBRARY_PATH="$m/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" ;; esac
EOF
}

# The physical cores this process may run on (sched_getaffinity, then the cores' topology ids).
allowed_cores() {
  python3 - <<'PY'
import os
cores = set()
for c in os.sched_getaffinity(0):
    base = f"/sys/devices/system/cpu/cpu{c}/topology/"
    try:
        with open(base + "physical_package_id") as f, open(base + "core_id") as g:
            cores.add((f.read().strip(), g.read().strip()))
    except OSError:
        cores.add(("cpu", str(c)))
print(len(cores), len(os.sched_getaffinity(0)))
PY
}

run_dist() {
  local root=$1 out=$2
  local d="$out/dist" summary="$out/summary.txt" status=0
  local budget="${ANVIL_GPU_DIST_BUDGET:-540}" ranks="${ANVIL_GPU_DIST_RANKS:-1,2,4,8,16}"
  local models="${ANVIL_GPU_DIST_MODELS:-fcn5,alexnet,lstm32}" batches="${ANVIL_GPU_DIST_BATCHES:-64,16,128}"
  local plain="${ANVIL_GPU_DIST_PLAIN_RANKS:-2,16}" max_bytes="${ANVIL_GPU_DIST_MAX_BYTES:-67108864}"
  # 5 repetitions with their spread, and the f32 and bf16 gradient buckets side by side; the
  # baselines (triad, unfolded 1 rank, uncoupled replicas) are dist_bench.sh's default.
  local reps="${ANVIL_GPU_DIST_REPS:-5}" dtypes="${ANVIL_GPU_DIST_DTYPES:-f32,bf16}"
  local t_start=$SECONDS
  mkdir -p "$d"
  note() { echo "$*" | tee -a "$summary"; }
  # The stage's machine and revision (Note [Provenance]; gpu_kit.sh run exports the kit's
  # revision as ANVIL_GIT_REVISION); anvil_dist_bench's JSON files carry their own.
  python3 scripts/provenance.py --out "$d/provenance.json" || note "dist: no provenance.json"
  left() { echo $((budget - (SECONDS - t_start))); }
  [ -x "$root/mpi/bin/orterun" ] || { note "dist: FAIL: no Open MPI in the kit (pack with --with-mpi)"; return 1; }
  eval "$(mpi_env "$root")"
  # step NAME LIMIT COMMAND...: runs under `timeout` (LIMIT, at most what is left of the budget),
  # output in dist/NAME.txt, one summary line; sets rc.
  step() {
    local name=$1 limit=$2; shift 2
    local l; l=$(left)
    if [ "$l" -lt 15 ]; then note "dist $name: SKIPPED: the budget of $budget s is spent"; rc=skipped; status=1; return; fi
    [ "$limit" -gt "$l" ] && limit=$l
    local t0=$SECONDS
    echo "+ $*" > "$d/$name.txt"
    timeout -k 10 "$limit" "$@" >> "$d/$name.txt" 2>&1 < /dev/null
    rc=$?
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "TIMEOUT after $limit s" >> "$d/$name.txt"
    note "dist $name: exit $rc in $((SECONDS - t0)) s (limit $limit s)$( [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo ', TIMED OUT')"
    [ "$rc" = 0 ] || status=1
  }
  local rc
  note "dist: Open MPI from the kit: $(command -v mpirun); $(mpirun --version 2>&1 | grep -m1 "Open MPI"); budget $budget s"
  ompi_info --path all > "$d/ompi_info_path.txt" 2>&1
  note "dist: ompi_info: $(grep -E '^ *(Pkglibdir|Pkgdatadir|Sysconfdir):' "$d/ompi_info_path.txt" | tr -s ' ' | tr '\n' ';')"
  ldd "$root/mpi/bin/orterun" "$root/build/lib/libanvil_mpi.so" "$root"/mpi/lib/openmpi/*.so \
    "$root/build/bench/distributed/anvil_dist_bench" "$root/build/tests/distributed/test_dist_mpi" > "$d/ldd.txt" 2>&1
  if grep -q "not found" "$d/ldd.txt"; then
    note "dist: FAIL: libraries not found: $(grep "not found" "$d/ldd.txt" | awk '{print $1}' | sort -u | tr '\n' ' ')"
    return 1
  fi
  note "dist: libraries: all resolve; libmpi.so.40 => $(awk '$1 == "libmpi.so.40" {print $3; exit}' "$d/ldd.txt")"
  # PMIx 4 (mpirun's server for the ranks) listens on TCP: without an up loopback mpirun stops with
  # "The PMIx server's listener thread failed to start" (checked here in `unshare -n`).
  local lo_flags
  lo_flags=$(python3 -c 'import fcntl, socket, struct  # SIOCGIFFLAGS in this network namespace
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
print(struct.unpack("H", fcntl.ioctl(s.fileno(), 0x8913, struct.pack("256s", b"lo"))[16:18])[0])' \
    2>/dev/null || echo 0)
  if [ $((lo_flags & 1)) = 0 ]; then
    note "dist: WARNING: the loopback interface lo is down (flags $lo_flags): mpirun's PMIx server needs it"
  fi
  # A small /dev/shm (a container's default 64 MiB) cannot hold 16 ranks' shared-memory segments.
  local shm_mb
  shm_mb=$(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
  if [ -z "$shm_mb" ] || [ "$shm_mb" -lt 1024 ]; then
    export OMPI_MCA_btl_vader_backing_directory=/tmp
    note "dist: /dev/shm has ${shm_mb:-no} MiB free: shared-memory segments in /tmp (btl_vader_backing_directory)"
  fi
  read -r cores cpus <<< "$(allowed_cores)"
  local bind=core maxr
  maxr=$(tr ',' '\n' <<< "$ranks" | sort -n | tail -1)
  if [ "$maxr" -gt "$cores" ]; then bind=none; fi
  note "dist: $cores physical cores, $cpus CPUs allowed; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
       "ranks $ranks, bind $bind; load $(cut -d' ' -f1-3 /proc/loadavg)"
  local mpi=(mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE -x ANVIL_DIST_TIMEOUT=60)

  # a. MPI works here: the collectives and the 2-rank data-parallel correctness tests.
  local filter="mpi*,data parallel on 2 ranks equals*"
  step mpi_check 90 "${mpi[@]}" --bind-to none -np 2 "$root/build/tests/distributed/test_dist_mpi" --use-colour no "$filter"
  if [ "$rc" != 0 ] && grep -qiE "CMA|process_vm_(readv|writev)|single.copy" "$d/mpi_check.txt"; then
    # Containers may forbid cross-process memory access (process_vm_readv): copy through the segment.
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    note "dist: single-copy (CMA) failed; again with btl_vader_single_copy_mechanism=none"
    status=0
    step mpi_check_nocma 90 "${mpi[@]}" --bind-to none -np 2 "$root/build/tests/distributed/test_dist_mpi" --use-colour no "$filter"
  fi
  note "dist mpi_check: $(grep -hE '^(All tests passed|test cases:)' "$d"/mpi_check*.txt | tail -1)"
  if [ "$status" != 0 ]; then
    note "dist: MPI does not work from the kit; scaling and NCCL steps not run"
    return 1
  fi

  # b. The NCCL single-GPU path (one rank: the communicator, its all-reduce sweep, anvil train).
  # It runs before the scaling sweep, which takes whatever budget is left: the sweep is bounded
  # and reports what it skipped, while the NCCL path (a few short runs) must not be starved.
  # test_cuda_runtime's [nccl] cases (tests/cuda/test_cuda_nccl.cpp), now started by mpirun.
  step nccl_test 90 "${mpi[@]}" --bind-to none -np 1 "$root/build/tests/cuda/test_cuda_runtime" "[nccl]" --use-colour no
  if ! grep -q "^GPU tests run on" "$summary"; then
    # Without a GPU the test binary must say so (exit 77, "SKIPPED: <reason>") under mpirun; the
    # stage's status stays non-zero (as for the GPU tests): the NCCL path did not run.
    if [ "$rc" = 77 ] && grep -q "^SKIPPED: " "$d/nccl_test.txt"; then
      note "dist nccl: SKIPPED (exit 77): $(grep -m1 '^SKIPPED: ' "$d/nccl_test.txt" | cut -c10-)"
    else
      note "dist nccl: FAIL: no GPU, and test_cuda_runtime [nccl] did not report itself skipped (exit $rc)"
    fi
    status=1
  else
    note "  $(grep -hE '^(All tests passed|test cases:)' "$d/nccl_test.txt" | tail -1)"
    step nccl_allreduce 60 "${mpi[@]}" --bind-to none -np 1 "$root/build/bench/distributed/anvil_dist_bench" \
      allreduce --dist nccl --max-bytes 1073741824 --out "$d/nccl_allreduce_np1.json"
    note "  $(grep -m1 -E 'allreduce +1073741824 B' "$d/nccl_allreduce.txt" || tail -1 "$d/nccl_allreduce.txt")"
    if [ -f "$root/data/fashion-mnist/train-images-idx3-ubyte.gz" ]; then
      step nccl_train 90 "${mpi[@]}" --bind-to none -np 1 "$root/build/bin/anvil" train --model mlp_mnist \
        --dataset "$root/data/fashion-mnist" --device cuda --dist nccl --epochs 1 --optimizer adam --lr 1e-3 \
        --seed 1 --json-log "$d/nccl_train.json"
      grep -q "^distributed: nccl backend" "$d/nccl_train.txt" || { note "  no 'distributed: nccl backend' line"; status=1; }
      note "  $(grep -E '^(distributed|test accuracy|training time)' "$d/nccl_train.txt" | tr -s ' ' | tr '\n' ';')"
    else
      note "dist nccl_train: SKIPPED: no Fashion-MNIST in the kit (pack --with-fashion-mnist)"; status=1
    fi
    # Host-staged collectives (Note [Host-staged device collectives]): 2 ranks share the GPU,
    # data parallelism = one process on the global batch (test_cuda_runtime [staged]).
    step staged_test 120 "${mpi[@]}" --bind-to none -np 2 "$root/build/tests/cuda/test_cuda_runtime" "[staged]" --use-colour no
    note "  staged: $(grep -hE '^(All tests passed|test cases:)' "$d/staged_test.txt" | tail -1)"
  fi

  # c. CPU data-parallel scaling: scripts/dist_bench.sh (triad, all-reduce sweeps in f32 and bf16,
  # weak and strong steps, the unfolded 1-rank and uncoupled-replica baselines, bf16 buckets).
  local l
  l=$(left)
  if [ "$l" -lt 30 ]; then
    note "dist scaling: SKIPPED: $l s left of the budget"; status=1
  else
    step scaling "$l" bash "$here/dist_bench.sh" --build "$root/build" --out "$d/scaling" --ranks "$ranks" \
      --plain-ranks "$plain" --models "$models" --batches "$batches" --reps "$reps" \
      --grad-bucket-dtypes "$dtypes" --max-bytes "$max_bytes" \
      --bind "$bind" --timeout 90 --budget "$((l - 15))"
    note "  $(grep -c '^+ ' "$d/scaling/commands.txt" 2>/dev/null) mpirun runs, $(grep -cE '^(TIMEOUT|SKIPPED)' "$d/scaling/commands.txt" 2>/dev/null) timed out or skipped;" \
         "$d/scaling/scaling.md, $d/scaling/report.md"
  fi

  return $status
}

# Runs COMMAND in a private mount namespace where this machine's Open MPI is hidden, as on the GPU
# machine (needs root and unshare(1)): empty folders over Open MPI's, PMIx's and hwloc's plugin,
# help and configuration folders, /dev/null over the Open MPI programs and over every file of
# libmpi*, libopen-*, libmca_common_*, liboshmem, libpmix, libhwloc, libevent* and libmunge in
# /usr/lib/x86_64-linux-gnu. Fails (loudly) when the namespace cannot be made.
without_system_mpi() {
  [ $# -gt 0 ] || { echo "gpu_kit_mpi.sh without-system-mpi: no command" >&2; return 2; }
  unshare -m --propagation private bash -c '
    set -e
    sys=/usr/lib/x86_64-linux-gnu
    empty=$(mktemp -d)
    for d in $sys/openmpi $sys/pmix2 $sys/hwloc /usr/share/openmpi /etc/openmpi; do
      [ -d "$d" ] && mount --bind "$empty" "$d"
    done
    for f in /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info $sys/libmpi*.so* $sys/libopen-*.so*              $sys/libmca_common_*.so* $sys/liboshmem*.so* $sys/libpmix*.so* $sys/libhwloc*.so*              $sys/libevent*.so* $sys/libmunge*.so*; do
      [ -e "$f" ] && [ ! -L "$f" ] && mount --bind /dev/null "$f"
    done
    echo "without-system-mpi: hidden: $(mount | grep -c -e "$sys" -e /usr/bin/o -e openmpi) mounts; /usr/bin/mpirun is now $(readlink -f /usr/bin/mpirun) ($(stat -c %F "$(readlink -f /usr/bin/mpirun)"))"
    exec "$@"' without-system-mpi "$@"
}

case "${1:-}" in
  pack) shift; pack_mpi "$@" ;;
  env) shift; mpi_env "$@" ;;
  run) shift; run_dist "$@" ;;
  without-system-mpi) shift; without_system_mpi "$@" ;;
  *) sed -n 3,13p "$0"; exit 2 ;;
esac
