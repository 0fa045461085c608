// GEMM default-selection heuristic (kernels/cpu/gemm_heuristic.h): picks the CPU variant for a
// problem from (M, N, K, transpose modes, batch, ldb) by the rules of Note [GEMM heuristic].
// Each rule names a ranked list; the first variant that is registered and supports the problem
// wins, so the rules hold whether or not cpu.blocked / cpu.eigen / oneDNN are built in.
#include "kernels/cpu/gemm_heuristic.h"

#include <array>
#include <cstdint>

#include "engine/dispatch/gemm_problem.h"

namespace anvil::kernels {
namespace {

// Note [GEMM heuristic]
// Measured with the standalone GEMM variants driver (gemm_variants_driver.cpp: every variant
// checked against ref first, then timed), f32, dense, beta = 0, on the dev machine's 2-vCPU
// AMD EPYC. That CPU is a Zen 4 (family 25, model 17, "Genoa"), not the Zen 5 of TOOLCHAIN.md:
// its 512-bit FMAs are double-pumped, so the FP32 peak is ~117 GFLOP/s per core, 234 on both (a
// 12-chain FMA probe run beside every row), not 242. The host was shared (load 2-11), so the
// numbers are CPU-time GFLOP/s (process CPU seconds / threads; best of 3 interleaved calls, best
// over 4-6 runs); wall-time rows taken while it was quiet agree. GFLOP/s at 1 thread / 2 threads:
//
//   (M,N,K)             mode  blocked   onednn    matmul    eigen    -> pick (rule)
//   DLBench 1024,2048,26752 NN 110/217  110/220    97/195  101/164   onednn (6)  94% of peak
//                       NT   108/215   110/218   104/205   99/167   onednn (6)  93%
//                       TN   111/219   111/220   102/204  100/172   onednn (6)  94%
//                       TT   109/215   110/218   103/208  100/180   onednn (6)  93%
//   FCN 64,2048,26752   NN   108/216   110/215    77/153   79/46    blocked (5)
//                       NT    89/176    62/125    90/178   68/25    matmul (2)
//                       TN   108/215    84/164    81/160   78/50    blocked (5)
//                       TT    89/173    62/124    86/169   66/50    matmul (2)  96-98 % of blocked
//   FCN 64,26752,2048   NN   102/204   112/223    93/185   54/100   onednn (6)
//                       NT    81/161    70/67     95/189   45/81    matmul (2)
//                       TN   102/202   111/223    97/191   54/100   onednn (6)
//                       TT    81/162    33/67     91/181   46/79    matmul (2)
//   FCN 64,2048,2048    NN   108/215   108/211    86/173   80/22    blocked (5)
//                       NT    87/168    72/67     97/189   65/22    matmul (2)
//                       TN   110/214    88/171    85/170   78/69    blocked (5)
//                       TT    87/166    34/67     92/183   61/21    matmul (2)
//   FCN 2048,26752,64   all  104/201-204  94-95/187-189  83-85/166-168  70-71/150  blocked (4)
//   FCN 2048,2048,64    all  101-105/206-211  101-104/208-211  97-100/195-204  82-89  blocked (4)
//   FCN 26752,2048,64   all  102-103/203-204  98-99/196-197  93-94/186-187  76-77/155  blocked (4)
//
// Two effects explain most of it:
//  * dnnl_sgemm with a skinny C (M <= 256) and B transposed runs at 30-60 % of its NN speed
//    (62 vs 110, 33 vs 112): TOOLCHAIN.md's observation, reproduced. The matmul primitive
//    (brgemm) does not care, and cpu.blocked, which packs B, is close behind it.
//  * dnnl_sgemm with M <= 256 and B not transposed is fast (111-113) unless the rows of B are
//    4 KiB-aliased (ldb a multiple of 1024 floats: every row maps to the same L1 sets). Sweep at
//    M = 64, K = 2048, TN, 1 thread: N = 2000 / 3000 / 5000 / 10000 / 20000 / 26752 -> sgemm
//    111-113, blocked 101-108; N = 2048 / 3072 / 4096 / 5120 / 6144 / 8192 / 12288 / 16384 /
//    32768 -> sgemm 80-88, blocked 106-110 (NN: sgemm 97-108 there, blocked 106-110). That is
//    why FCN's N = 2048 layers prefer blocked and its N = 26752 layer prefers sgemm.
// Beyond the FCN/DLBench requirement (1 thread / 2 threads, best variant first):
//  * batched: 32 x (64,64,64): matmul 92-107/134-141, blocked 93-100/105-135, sgemm loop
//    73-96/19-68; 8 x (256,256,256): matmul 106-114/206-223, sgemm 99-112/165-213. One
//    batched primitive beats a loop of calls.
//  * skinny N, (2048,64,2048): matmul 84-113/168-222 is best or within 2 % in every mode
//    (sgemm 75-102/142-205, blocked 81-87/149-166).
//  * (128,2048,1024) and (256,2048,2048): the same pattern as the FCN small-M rows.
//
// Rules, in order; each names a ranking, and the first variant in it that is registered and
// supports the problem is the pick (so builds without cpu.blocked or oneDNN stay sensible):
//  1. batch > 1:                         matmul > onednn > blocked
//  2. B transposed, M <= 256:            matmul > blocked > onednn
//  3. N <= 256 < M (skinny C):           matmul > onednn > blocked
//  4. K <= 128 and M*N >= 2^20 (weight gradients): blocked > onednn > matmul
//     (blocked leads by 2-10 %; sgemm is 90-99 % of it, matmul 81-97 %)
//  5. M <= 256, B not transposed, ldb % 1024 == 0 (aliased B rows): blocked > onednn > matmul
//  6. otherwise:                         onednn > blocked > matmul
//     (sgemm is best or within 2 %: 93-95 % of the FMA peak on DLBench in all four modes)
// Eigen comes last in every ranking: it trails everywhere, and its 2-thread GEMM collapses on a
// busy host (its threads spin-wait on each other: 21-50 GFLOP/s above). `ref` is never named;
// selection falls back to it by priority.
constexpr std::int64_t kSmallM = 256;       // "batch-sized" M (FCN 64, LSTM 128)
constexpr std::int64_t kSmallN = 256;
constexpr std::int64_t kSmallK = 128;       // weight-gradient depth (= batch size)
constexpr std::int64_t kLargeC = 1 << 20;   // M*N elements of a weight gradient
constexpr std::int64_t kAliasLd = 1024;     // floats: 4 KiB, the L1 set-aliasing stride

using Ranking = std::array<const char*, 4>;

constexpr Ranking kMatmulFirst = {"cpu.onednn.matmul", "cpu.onednn", "cpu.blocked", "cpu.eigen"};
constexpr Ranking kMatmulThenBlocked = {"cpu.onednn.matmul", "cpu.blocked", "cpu.onednn",
                                        "cpu.eigen"};
constexpr Ranking kBlockedFirst = {"cpu.blocked", "cpu.onednn", "cpu.onednn.matmul", "cpu.eigen"};
constexpr Ranking kSgemmFirst = {"cpu.onednn", "cpu.blocked", "cpu.onednn.matmul", "cpu.eigen"};

const Ranking& ranking_for(const GemmProblem& p) {
  if (p.batch > 1) return kMatmulFirst;                                   // rule 1
  if (p.trans_b && p.m <= kSmallM) return kMatmulThenBlocked;             // rule 2
  if (p.n <= kSmallN && p.m > kSmallN) return kMatmulFirst;               // rule 3
  if (p.k <= kSmallK && p.m * p.n >= kLargeC) return kBlockedFirst;       // rule 4
  if (p.m <= kSmallM && !p.trans_b && p.ldb % kAliasLd == 0) return kBlockedFirst;  // rule 5
  return kSgemmFirst;                                                     // rule 6
}

}  // namespace

std::string gemm_heuristic_pick(const GemmProblem& p) {
  if (p.device_type() != DeviceType::cpu || p.dtype != DType::f32) return "";
  const GemmTable& table = gemm_table();
  for (const char* name : ranking_for(p)) {
    const auto* v = table.find(name);
    if (v && (!v->supports || v->supports(p).ok)) return name;
  }
  return "";
}

void install_gemm_heuristic() { gemm_table().set_heuristic(gemm_heuristic_pick); }

}  // namespace anvil::kernels
