#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Revert-checks of issue 23's fixes (docs/results/hardening_reverts_2026-11-25.md). Run from the
repository root, on a clean tree at the commit the table names. Revert-checks: `mutate.py apply NAME` rewrites the fix's core lines back to the pre-fix
behaviour (exact text replacements, each must match once); `mutate.py restore NAME` puts the
committed files back (git checkout HEAD -- files)."""
import pathlib, subprocess, sys

FIFO_OLD = r'''  if (!S_ISREG(st.st_mode)) {  // REVERT CHECK: the pre-fix readers read pipes/devices to EOF
    std::ifstream in(path, std::ios::binary);  // blocking open, as before
    Buffer bytes;
    std::array<char, 65536> chunk;
    while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0)
      bytes.insert(bytes.end(), chunk.data(), chunk.data() + in.gcount());
    return bytes;
  }
'''
M = {
 "ckpt": [("engine/optim/checkpoint.cpp",
           "    model.check_extra_state(module_states);  // e.g. every Dropout generator text parses\n", "")],
 "gzip": [("data/idx.cpp", "  std::size_t limit = static_cast<std::size_t>(max_bytes) + 1;\n", "  std::size_t limit = SIZE_MAX;\n"),
          ("data/idx.cpp", "    if (produced >= limit) fail_extra();  // checked on every call: never past max_bytes + 1\n", ""),
          ("data/idx.cpp", "  if (product > max_bytes || h.header_bytes + product > max_bytes)\n",
           "  if (product > (std::uint64_t{1} << 40))  // REVERT CHECK: the old 1 TiB bound\n")],
 "fifo": [("data/file_bytes.cpp", "#include <cstring>\n", "#include <cstring>\n#include <array>\n#include <fstream>\n"),
          ("data/file_bytes.cpp", '''  if (!S_ISREG(st.st_mode))
    fail(where, path, ": is not a regular file (", kind_of(st.st_mode),
         "); dataset files are read only from regular files");
''', FIFO_OLD)],
 "tally": [("tests/helpers/variant_tally.cpp", "    ++under;\n", ""),
           ("tests/helpers/variant_tally.cpp", "    CHECK(n >= minimum_);\n", "")],
 "blocked": [("kernels/cpu/blocked/gemm_blocked.cpp", "  for (i64 ic = 0; ic < p.m; ic += pl.mc) {\n",
              "  for (i64 ic = 0; ic < std::min(p.m, pl.mc); ic += pl.mc) {  // PLANTED: first row block only\n")],
 "ce_sign": [("engine/autograd/functions_softmax.cpp",
              "      const double scale = 1.0 / static_cast<double>(std::max<std::int64_t>(n, 1));\n",
              "      const double scale = -1.0 / static_cast<double>(std::max<std::int64_t>(n, 1));  // PLANTED\n")],
 "train_ms": [("tools/anvil/trainer.cpp", "    e.train_seconds = seconds_since(t0);\n",
               "    e.train_seconds = seconds_since(t0) * 1000.0;  // PLANTED: milliseconds reported as seconds\n")],
 "cpu_pct": [("tools/anvil/trainer.cpp", "  r.cpu_utilisation = cpu_this_run / (wall_this_run * r.threads);\n",
              "  r.cpu_utilisation = 100.0 * cpu_this_run / wall_this_run;  // PLANTED: percent, not per thread\n")],
 "cli_text": [("tools/anvil/trainer.cpp", "    out << fmt::format(\"test accuracy      {:.2f} % (loss {:.4f})\\n\", r.test_metric * 100.0,\n",
               "    out << fmt::format(\"test accuracy      {:.2f} % (loss {:.4f})\\n\", std::nan(\"\"),  // PLANTED\n"),
              ("models/registry.cpp", "    fail(\"models::info\", \"unknown model '\", name, \"'; known models: \", known);\n",
               "    fail(\"models::info\", \"unknown model '\", name, \"'\");  // PLANTED: the known models not listed\n")],
 "dispatch": [("engine/dispatch/variant_table.h", """    auto next = std::make_unique<Snapshot>(cur);
    next->variants.push_back(nodes_.back().get());
    std::stable_sort(next->variants.begin(), next->variants.end(),
                     [](const Variant* a, const Variant* b) { return a->priority > b->priority; });
    publish(std::move(next));
  }
""", """    // REVERT CHECK: the pre-fix table changed its one list in place, under the readers.
    auto& live = const_cast<Snapshot&>(cur);
    live.variants.push_back(nodes_.back().get());
    std::stable_sort(live.variants.begin(), live.variants.end(),
                     [](const Variant* a, const Variant* b) { return a->priority > b->priority; });
  }
""")],
 # "nan" also reverse-applies the fix commit's diff of NAN_FILES (main() below).
 "nan": [("kernels/cpu/omp/elementwise_omp.cpp", "  return v <= zero ? zero : v;\n", "  return v > zero ? v : zero;\n"),
         ("kernels/cpu/omp/elementwise_omp.cpp", "  for (; i < n; ++i) out[i] = a[i] <= 0.0f ? 0.0f : a[i];\n",
          "  for (; i < n; ++i) out[i] = a[i] > 0.0f ? a[i] : 0.0f;\n"),
         ("kernels/cpu/omp/elementwise_omp.cpp", "    vec::store(out + i, v <= zero ? zero : vec::load(dy + i));\n",
          "    vec::store(out + i, v > zero ? vec::load(dy + i) : zero);\n"),
         ("kernels/cpu/omp/elementwise_omp.cpp", "  for (; i < n; ++i) out[i] = x[i] <= 0.0f ? 0.0f : dy[i];\n",
          "  for (; i < n; ++i) out[i] = x[i] > 0.0f ? dy[i] : 0.0f;\n")],
 "bench_filter": [("scripts/bench.sh", 'bench "^model/$m/$ph/batch:[0-9]+/threads:$t/$variant_rows"',
                   'bench "^model/$m/$ph/batch:[0-9]/threads:$t/$variant_rows"')],  # PLANTED: matches no batch >= 10
 "pool_decliner": [("kernels/cpu/omp/pool_omp.cpp", "Support supports_omp(const PoolProblem& p) {\n",
                    "Support supports_omp(const PoolProblem& p) {\n  return Support::no(\"PLANTED: declines everything\");\n")],
 "sgd_sign": [("engine/optim/optimizer.cpp", "  args.sgd = {opt_.lr, opt_.momentum,", "  args.sgd = {-opt_.lr, opt_.momentum,")],
}

NAN_FIX = "b775eb0"
NAN_FILES = ["kernels/cpu/elementwise_functors.h", "kernels/cpu/im2col/conv_im2col.cpp",
             "kernels/cpu/omp/pool_omp.cpp", "kernels/cpu/ref/conv_ref.cpp", "kernels/cpu/ref/pool_ref.cpp",
             "kernels/cpu/onednn/conv_onednn.cpp", "kernels/cpu/onednn/pool_onednn.cpp"]


def main():
    cmd, name = sys.argv[1], sys.argv[2]
    files = sorted({f for f, _, _ in M[name]} | (set(NAN_FILES) if name == "nan" else set()))
    if cmd == "restore":
        subprocess.run(["git", "checkout", "HEAD", "--"] + files, check=True)
        return
    for f in files:
        subprocess.run(["git", "diff", "--quiet", "HEAD", "--", f], check=True)  # clean before
    if name == "nan":
        diff = subprocess.run(["git", "diff", NAN_FIX + "^", NAN_FIX, "--"] + NAN_FILES,
                              check=True, capture_output=True).stdout
        subprocess.run(["git", "apply", "-R"], input=diff, check=True)
    for f, a, b in M[name]:
        p = pathlib.Path(f)
        s = p.read_text()
        assert s.count(a) == 1, (name, f, a)
        p.write_text(s.replace(a, b))
    subprocess.run(["git", "--no-pager", "diff", "--stat"] + files)

if __name__ == "__main__":
    main()
