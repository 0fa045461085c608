// GEMM default-selection heuristic (kernels/cpu/gemm_heuristic.h): picks the CPU variant for a
// problem from (M, N, K, transpose modes, batch) by the rules of Note [GEMM heuristic]. Each rule
// names a ranked list; the first variant that is registered and supports the problem wins, so
// the rules hold whether or not cpu.blocked / cpu.eigen / oneDNN are built in.
#include "kernels/cpu/gemm_heuristic.h"

#include <array>
#include <cstdint>

#include "engine/dispatch/gemm_problem.h"

namespace anvil::kernels {
namespace {

// Note [GEMM heuristic]
// Measured with /tmp/gemm_variants_driver (kept by the GEMM variants work; see docs/benchmarks),
// f32, dense, beta = 0, on the 2-vCPU AMD EPYC of the dev machines, which is a Zen 4 (CPU family
// 25 model 17, "Genoa"): 512-bit FMAs are double-pumped, so the FP32 peak is ~117 GFLOP/s per
// core (234 on both), measured beside every row by a 12-chain FMA probe, not the 242 that
// TOOLCHAIN.md quotes for Zen 5. The host was shared (load 4-11), so the tables use CPU time
// (process CPU seconds / threads, best of >= 3 interleaved runs, over several runs); wall-time
// rows from quieter moments agree where we have them. GFLOP/s, 1 thread / 2 threads:
//
//   shape (M,N,K)        mode  blocked    onednn     matmul     eigen     winner
//   DLBench 1024,2048,26752 NN  109/213   111/221    98/189    101/173   onednn  (95% of peak)
//                        NT    107/207   108/213   103/206     98/165   onednn  (92%)
//                        TN    108/213   108/214    99/195     98/167   onednn  (92%)
//                        TT    105/210   108/215    97/199     96/166   onednn  (92%)
//   FCN 64,2048,26752    NN    108/214   109/214    75/149     74/73    onednn ~ blocked
//                        NT     90/178    61/121    90/180     67/41    matmul ~ blocked
//                        TN    110/217    85/166    82/163     77/22    blocked
//                        TT     90/177    62/124    87/165     66/66    blocked ~ matmul
//   FCN 64,26752,2048    NN    105/204   109/219    93/184     54/100   onednn
//                        NT     81/161    69/66     95/189     44/80    matmul
//                        TN    102/207   111/221    96/188     54/100   onednn (blocked 92-93%)
//                        TT     81/162    33/66     88/179     44/81    matmul
//   FCN 64,2048,2048     NN    107/206   106/208    84/167     75/149   blocked ~ onednn
//                        NT     85/171    72/67     95/193     62/52    matmul
//                        TN    110/214    88/168    84/170     80/100   blocked
//                        TT     86/166    34/67     92/179     63/109   matmul
//   FCN 2048,26752,64    all   102-104/199-205  92-94/183-187  84-86/168-170  71/150  blocked
//   FCN 2048,2048,64     all   104-107/206-210  99-104/200-202 98-102/194-202 82-95  blocked
//   FCN 26752,2048,64    all   101-104/200-206  98/194-197     94-96/186-189  75-77  blocked
//
// Rules, in order (first registered variant of the list that supports the problem):
//  1. op(B) transposed and M small (M <= 256): cpu.onednn.matmul > cpu.blocked > cpu.onednn.
//     dnnl_sgemm loses 30-70 % here (61 vs 90, 33 vs 88: its row-major 'T' path for a skinny
//     C), exactly as TOOLCHAIN.md reports; the matmul primitive's brgemm kernels do not care.
//     cpu.blocked is 93-105 % of matmul on these rows (TT 64,2048,26752 it is 3 % ahead).
//  2. K small (K <= 128, the weight-gradient GEMMs, C as large as A and B together):
//     cpu.blocked > cpu.onednn > cpu.onednn.matmul. blocked leads by 3-10 %, oneDNN sgemm is
//     next (90-98 % of blocked), matmul trails (82-97 %).
//  3. op(A) transposed, op(B) not, M small (TN, M <= 256): cpu.blocked > cpu.onednn >
//     cpu.onednn.matmul. dnnl_sgemm loses 20 % on two of the three shapes (85 vs 110); blocked is
//     92-93 % of dnnl_sgemm on the third (64,26752,2048), within the 10 % budget.
//  4. Everything else (large GEMMs, small-M NN): cpu.onednn > cpu.blocked > cpu.onednn.matmul.
//     dnnl_sgemm is the best or within 2 % on every such row, at 92-95 % of the FMA peak on the
//     DLBench shape in all four modes at 1 thread; blocked is 97-99 % of it.
// Eigen is never preferred (it trails everywhere and its 2-thread GEMM collapses on a busy host:
// its threads spin on each other); it is still listed last so an Eigen-only build uses it.
// `ref` is never named: selection falls back to it by priority.
constexpr std::int64_t kSmallM = 256;  // "batch-sized" M: 64-row FCN/LSTM GEMMs
constexpr std::int64_t kSmallK = 128;  // weight-gradient depth (= batch size)

using Ranking = std::array<const char*, 4>;

constexpr Ranking kRankSkinnyTransB = {"cpu.onednn.matmul", "cpu.blocked", "cpu.onednn",
                                       "cpu.eigen"};
constexpr Ranking kRankSmallK = {"cpu.blocked", "cpu.onednn", "cpu.onednn.matmul", "cpu.eigen"};
constexpr Ranking kRankSkinnyTN = {"cpu.blocked", "cpu.onednn", "cpu.onednn.matmul", "cpu.eigen"};
constexpr Ranking kRankDefault = {"cpu.onednn", "cpu.blocked", "cpu.onednn.matmul", "cpu.eigen"};

const Ranking& ranking_for(const GemmProblem& p) {
  if (p.trans_b && p.m <= kSmallM) return kRankSkinnyTransB;
  if (p.k <= kSmallK) return kRankSmallK;
  if (p.trans_a && !p.trans_b && p.m <= kSmallM) return kRankSkinnyTN;
  return kRankDefault;
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
