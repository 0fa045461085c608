// SPDX-License-Identifier: Apache-2.0
// GEMM `cpu.blocked`, AVX-512 part: the 14x32 f32 micro-kernel and its edge tiles, the
// macro-kernel over one packed A block x one B block (packed by the first row of tiles, or by
// 16x16 register transposes when B is transposed), and A packing. Row-major C; packed layouts in
// Note [Packed layouts]. Compiled with -mavx512f/dq/bw/vl -mfma: see Note [ISA translation units]
// (blocked_kernels.h) for what may and may not appear here.
// GCC 12 reports its own _mm512_undefined_ps() (`__m512 __Y = __Y;`) as maybe-uninitialized
// when shuffles/set1 are inlined here: a false positive inside the intrinsics header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/blocked/blocked_kernels.h"

#ifndef ANVIL_BLOCKED_MR  // overridable only for tile-size experiments
#define ANVIL_BLOCKED_MR 14
#endif
#ifndef ANVIL_BLOCKED_NV
#define ANVIL_BLOCKED_NV 2
#endif

namespace anvil::kernels::blocked {
namespace {

using i64 = std::int64_t;

// Note [Register tile 14x32]
// A Zen 5 core retires two 512-bit FMAs per cycle with a latency of 4, so at least 2 x 4 = 8
// independent accumulator chains are needed to keep both pipes busy, and more give slack for
// load latency. 32 zmm registers hold MR x NV accumulators, NV vectors of B and one broadcast of
// A: 14 x 2 = 28 accumulators + 2 + 1 = 31 registers. Per step of k that is 2 vector loads and 14
// broadcasts for 28 FMAs (16 loads per 14 cycles, within the 2-3 loads/cycle of the core), and
// 128 B of B per 28 FMAs. The wider 6x64 tile (24 accumulators) needs 256 B of B per 24 FMAs,
// twice the L2 bandwidth, and B is the operand streamed from L2 (Note [Blocking]); 12x32 and
// 8x48 sit in between. On the host this was tuned on (a VM whose 512-bit and 256-bit FMA peaks
// are equal, 117 GFLOP/s, i.e. Zen 4-like one 512-bit FMA per cycle) 14x32, 12x32, 8x48 and 6x64
// all ran within noise of each other (100-105 GFLOP/s on M=1022 N=1024 K=6000), so the choice
// rests on the bandwidth argument. M edges (M = 64 is 4 x 14 + 8) use exact-height tiles, not
// zero padding, so no FMA is wasted on them; all DLBench N are multiples of 32.
constexpr int kMR = ANVIL_BLOCKED_MR;
constexpr int kNV = ANVIL_BLOCKED_NV;  // zmm vectors across a tile
constexpr int kNR = 16 * kNV;
static_assert(kMR >= 1 && kMR <= 16, "pack_a writes one micro-panel row with one masked store");
static_assert(kNV >= 1 && kMR * kNV + kNV <= 32, "accumulators + B vectors must fit in 32 zmm");

// Note [Blocking]
// Loop nest (driver in gemm_blocked.cpp, inner two loops here):
//   for ic (MC rows of A)  for pc (KC deep)  pack A block [MC x KC]      shared by the threads
//     for jc (NC columns, split across threads)  pack B block [KC x NC]   per thread, L2
//       for ir (MR rows)  for jr (NR columns)  micro-kernel               A micro-panel in L1
// The broadcast operand (A) stays near the core and the vector operand (B) streams from L2, as
// in BLIS's x86 kernels: the A micro-panel, 14 x 384 x 4 B = 21 KiB, is reused by the NC/NR = 8
// tiles of a row; the B block, 384 x 256 x 4 B = 384 KiB, sits in the 1 MiB private L2 with room
// for C tiles and A. KC = 384 also keeps C traffic low: each K step reads and writes C once
// (K/KC passes: 70 for K = 26752, from L3 for the 8 MiB DLBench C). MC only bounds the A buffer
// (2 x MC x KC x 4 B, double-buffered) and how often B is repacked (M / MC times). Measured on
// M=1022 N=1024 K=6000: KC in {256, 384, 512} x NC in {128, 256, 512} all gave 100-106 GFLOP/s
// on the 117 GFLOP/s host (noise ~5 %), KC = 256 the lowest; 384 x 256 keeps the L1 and L2
// footprints safe on both 32 KiB (Zen 4) and 48 KiB (Zen 5) L1s.
#ifndef ANVIL_BLOCKED_MC  // overridable only for blocking experiments
#define ANVIL_BLOCKED_MC 2048
#endif
#ifndef ANVIL_BLOCKED_KC
#define ANVIL_BLOCKED_KC 384
#endif
#ifndef ANVIL_BLOCKED_NC
#define ANVIL_BLOCKED_NC 256
#endif
constexpr int kMC = ANVIL_BLOCKED_MC;
constexpr int kKC = ANVIL_BLOCKED_KC;
constexpr int kNC = ANVIL_BLOCKED_NC;

// Note [Packed layouts]
// A micro-panel p (rows 14p .. 14p+mr-1, mr = 14 except for the last one) is stored [KC][mr]:
// element (r, l) at panel[l*mr + r]; the last panel is compact (stride mr, not 14) so that its
// edge tile, compiled for exactly mr rows, reads it directly. B micro-panel q (columns 32q ..) is
// stored [KC][wp], wp = the panel width rounded up to 16, zero padded: element (l, c) at
// panel[l*wp + c]. Panels start at p*14*KC and q*32*KC floats (blocked_kernels.h), so every B row
// is 64-byte aligned.

inline __mmask16 low_mask(i64 n) {  // lanes [0, n), n clamped to [0, 16]
  if (n >= 16) return 0xFFFF;
  if (n <= 0) return 0;
  return static_cast<__mmask16>((1u << n) - 1u);
}

// Note [Fused packing of B]
// When M is small (the FCN-5 batch-64 layers: M = 64) an element of B feeds only M/14 tiles, i.e.
// about 4 cycles of FMAs, while a separate packing pass costs 0.6 cycles per element even with
// the source in L2 (a load plus a store that misses L1) and 1-2 cycles from DRAM: measured,
// packing B was a quarter to a third of the run time at M = 64. So when op(B) is not transposed
// (its rows are contiguous, the packed layout is a plain copy), the first row of tiles reads B
// straight from the source and stores every vector it loads into the packed panel as it goes;
// the other rows of tiles read the packed panel. The copy costs two stores per 28 FMAs. Source
// rows are ldb apart (often pages apart, beyond the hardware prefetchers), so each step also
// prefetches into L2 the same row of the next panel (one whole tile of lead time) and the row
// kFusedAhead further down (which covers the first panel of a block). Measured at M = 64, K or
// N = 26752, 1 thread: separate pack 80-87 GFLOP/s, fused with only the row-ahead prefetch into
// L1 81-88, into L2 89-92, with both prefetches 93-99. Transposed B is still packed on its own
// (16x16 transposes in pack_b_transposed): a transpose cannot be fused into a broadcast-FMA tile.
constexpr i64 kFusedAhead = 16;

// One register tile: C[0:MR, 0:16*NV] = alpha * sum_l A[:, l] B[l, :] (+ beta * C), with the
// last vector's columns limited by `last_mask`. With FUSE, B rows are read from `bsrc` (ldb
// apart) and copied into the packed panel `bp`; otherwise they are read from `bp`. Always
// inlined into its per-shape instance.
template <int MR, int NV, bool FUSE>
__attribute__((always_inline)) inline void tile(i64 kc, const float* __restrict ap,
                                                float* __restrict bp, const float* bsrc, i64 ldb,
                                                float* c, i64 ldc, float alpha, float beta,
                                                bool read_c, __mmask16 last_mask) {
  // The C tile is needed only after the whole k loop (thousands of cycles from now): prefetch it
  // so the write-back does not stall on L3/DRAM latency with C read and written K/KC times.
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16 * v), _MM_HINT_T0);

  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();

      // Unrolling k by 1, 2 or 4 and software prefetch of packed B (256-1024 B ahead) measured the
      // same within noise: the packed B stream is sequential and the hardware prefetcher keeps up.
#pragma GCC unroll 2
  for (i64 l = 0; l < kc; ++l) {
    __m512 b[NV];
    if constexpr (FUSE) {
      // Into L2 (T1): row l + kFusedAhead of this panel, for the first panel of a block, and row
      // l of the next panel (the next 16*NV floats of the same source row), one tile ahead.
      const char* ahead = reinterpret_cast<const char*>(bsrc + kFusedAhead * ldb);
      const char* next = reinterpret_cast<const char*>(bsrc + 16 * NV);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        _mm_prefetch(ahead + 64 * v, _MM_HINT_T1);
        _mm_prefetch(next + 64 * v, _MM_HINT_T1);
      }
      _mm_prefetch(ahead + 64 * NV - 1, _MM_HINT_T1);  // a misaligned row straddles one more line
      _mm_prefetch(next + 64 * NV - 1, _MM_HINT_T1);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        b[v] = (v == NV - 1) ? _mm512_maskz_loadu_ps(last_mask, bsrc + 16 * v)
                             : _mm512_loadu_ps(bsrc + 16 * v);
        _mm512_store_ps(bp + 16 * v, b[v]);
      }
      bsrc += ldb;
    } else {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) b[v] = _mm512_load_ps(bp + 16 * v);
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(ap[r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
    ap += MR;
    bp += 16 * NV;
  }

  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = (v == NV - 1) ? last_mask : static_cast<__mmask16>(0xFFFF);
      __m512 x = _mm512_mul_ps(acc[r][v], va);
      // beta == 0 must not read C (NaN/Inf there must not leak): read_c is false then.
      if (read_c) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, cr + 16 * v), x);
      _mm512_mask_storeu_ps(cr + 16 * v, m, x);
    }
  }
}

using TileFn = void (*)(i64, const float*, float*, const float*, i64, float*, i64, float, float,
                        bool, __mmask16);

template <int MR, int NV, bool FUSE>
__attribute__((noinline)) void tile_fn(i64 kc, const float* ap, float* bp, const float* bsrc,
                                       i64 ldb, float* c, i64 ldc, float alpha, float beta,
                                       bool read_c, __mmask16 last_mask) {
  tile<MR, NV, FUSE>(kc, ap, bp, bsrc, ldb, c, ldc, alpha, beta, read_c, last_mask);
}

// Every tile shape: f[fuse][mr-1][nv-1] handles an mr-row, nv-vector tile.
struct TileTable {
  TileFn f[2][kMR][kNV];
};
template <int R, int V>
constexpr void fill_tiles(TileTable& t) {
  t.f[0][R - 1][V - 1] = &tile_fn<R, V, false>;
  t.f[1][R - 1][V - 1] = &tile_fn<R, V, true>;
  if constexpr (V > 1)
    fill_tiles<R, V - 1>(t);
  else if constexpr (R > 1)
    fill_tiles<R - 1, kNV>(t);
}
constexpr TileTable make_tiles() {
  TileTable t{};
  fill_tiles<kMR, kNV>(t);
  return t;
}
constexpr TileTable kTiles = make_tiles();

void pack_b_transposed(const float* b, i64 ldb, i64 kc, i64 nc, float* dst);

void macro(i64 mc, i64 nc, i64 kc, const float* ap, float* bp, const float* b_src, i64 ldb,
           bool b_trans, float* c, i64 ldc, float alpha, float beta, bool read_c) {
  // Transposed B: one packing pass over the block (packing each 32-column panel just before
  // its column of tiles instead measured 0-5 % slower at M = 64). Null b_src: bp is prepacked.
  if (b_trans && b_src != nullptr) {
    pack_b_transposed(b_src, ldb, kc, nc, bp);
    b_src = nullptr;
  }
  for (i64 i = 0; i < mc; i += kMR) {
    const i64 mr = (mc - i < kMR) ? mc - i : kMR;
    const float* api = ap + i * kc;
    const bool fuse = b_src != nullptr && i == 0;  // Note [Fused packing of B]
    for (i64 j = 0; j < nc; j += kNR) {
      const i64 w = (nc - j < kNR) ? nc - j : kNR;
      float* bpj = bp + j * kc;
      float* cij = c + i * ldc + j;
      if (mr == kMR && w == kNR && !fuse) {  // the hot path, inlined
        tile<kMR, kNV, false>(kc, api, bpj, nullptr, 0, cij, ldc, alpha, beta, read_c, 0xFFFF);
      } else {
        const i64 nv = (w + 15) / 16;
        kTiles.f[fuse][mr - 1][nv - 1](kc, api, bpj, fuse ? b_src + j : nullptr, ldb, cij, ldc,
                                       alpha, beta, read_c, low_mask(w - 16 * (nv - 1)));
      }
    }
  }
}

// In-register transpose of a 16x16 block: r[i] holds row i on entry, column i on exit.
// Stage 1/2 interleave within 128-bit lanes, stage 3/4 move 128-bit lanes (shuffle_f32x4).
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + x]: rows 4g..4g+3, columns {x, x+4, x+8, x+12} (one per 128-bit lane).
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  // v (rows 0-7) and w (rows 8-15): lanes [x rows lo, x+8 rows lo, x rows hi, x+8 rows hi].
#pragma GCC unroll 4
  for (int x = 0; x < 4; ++x) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[x], u[4 + x], 0x88);
    const __m512 v4 = _mm512_shuffle_f32x4(u[x], u[4 + x], 0xDD);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + x], u[12 + x], 0x88);
    const __m512 w4 = _mm512_shuffle_f32x4(u[8 + x], u[12 + x], 0xDD);
    r[x] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[x + 8] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    r[x + 4] = _mm512_shuffle_f32x4(v4, w4, 0x88);
    r[x + 12] = _mm512_shuffle_f32x4(v4, w4, 0xDD);
  }
}

// Packs op(A)[0:mc, 0:kc] into the panels of Note [Packed layouts]. The walk follows the
// source rows, front to back, in runs the hardware prefetcher can follow: a panel-by-panel walk
// of transposed A would read 56 bytes per source row at a stride of lda (often pages).
void pack_a(const float* a, i64 lda, bool trans, i64 mc, i64 kc, float* dst) {
  if (trans) {
    // op(A)(i, l) = a[l*lda + i]: row l of the source holds column l of every panel.
    for (i64 l = 0; l < kc; ++l) {
      const float* s = a + l * lda;
      for (i64 i = 0; i < mc; i += kMR) {
        const i64 mr = (mc - i < kMR) ? mc - i : kMR;
        const __mmask16 mm = low_mask(mr);
        _mm512_mask_storeu_ps(dst + i * kc + l * mr, mm, _mm512_maskz_loadu_ps(mm, s + i));
      }
    }
    return;
  }
  for (i64 i = 0; i < mc; i += kMR) {
    const i64 mr = (mc - i < kMR) ? mc - i : kMR;
    const __mmask16 mm = low_mask(mr);
    float* d = dst + i * kc;
    // op(A)(i+r, l) = a[(i+r)*lda + l]: rows run along l, so transpose 16-deep chunks.
    const float* s = a + i * lda;
    for (i64 l0 = 0; l0 < kc; l0 += 16) {
      const i64 lw = (kc - l0 < 16) ? kc - l0 : 16;
      const __mmask16 ml = low_mask(lw);
      __m512 r[16];
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q)
        r[q] = (q < mr) ? _mm512_maskz_loadu_ps(ml, s + q * lda + l0) : _mm512_setzero_ps();
      transpose16(r);
      for (i64 t = 0; t < lw; ++t) _mm512_mask_storeu_ps(d + (l0 + t) * mr, mm, r[t]);
    }
  }
}

// Packs op(B)[0:kc, 0:nc] with op(B)(l, j) = b[j*ldb + l] (B stored transposed) into panels of
// Note [Packed layouts]. (Untransposed B is packed by the tiles themselves: Note [Fused packing
// of B].) 16 columns x 16 deep at a time, transposed in registers; each source row is read
// front to back.
void pack_b_transposed(const float* b, i64 ldb, i64 kc, i64 nc, float* dst) {
  for (i64 j = 0; j < nc; j += kNR) {
    const i64 w = (nc - j < kNR) ? nc - j : kNR;
    const i64 wp = (w + 15) / 16 * 16;
    float* d = dst + j * kc;
    for (i64 v = 0; 16 * v < w; ++v) {
      const i64 cw = (w - 16 * v < 16) ? w - 16 * v : 16;
      const float* s = b + (j + 16 * v) * ldb;
      for (i64 l0 = 0; l0 < kc; l0 += 16) {
        const i64 lw = (kc - l0 < 16) ? kc - l0 : 16;
        const __mmask16 ml = low_mask(lw);
        // The same 64 bytes of the next 16 source rows, into L2: one group ahead is enough lead
        // time, and rows a page apart are beyond the hardware prefetchers (-20 % pack time).
        for (int q = 16; q < 32; ++q)
          _mm_prefetch(reinterpret_cast<const char*>(s + q * ldb + l0), _MM_HINT_T1);
        __m512 r[16];
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q)
          r[q] = (q < cw) ? _mm512_maskz_loadu_ps(ml, s + q * ldb + l0) : _mm512_setzero_ps();
        transpose16(r);
        for (i64 t = 0; t < lw; ++t) _mm512_store_ps(d + (l0 + t) * wp + 16 * v, r[t]);
      }
    }
  }
}

// Packs op(B)[0:kc, 0:nc] ahead of time (Note [Prepacked B] in gemm_blocked.cpp): transposed B
// as the macro-kernel would; untransposed B is copied row by row into the panels, the columns
// past the panel's width zero (the same bytes the fused tiles would store).
void pack_b(const float* b, i64 ldb, bool trans, i64 kc, i64 nc, float* dst) {
  if (trans) {
    pack_b_transposed(b, ldb, kc, nc, dst);
    return;
  }
  for (i64 j = 0; j < nc; j += kNR) {
    const i64 w = (nc - j < kNR) ? nc - j : kNR;
    const i64 wp = (w + 15) / 16 * 16;
    float* d = dst + j * kc;
    for (i64 l = 0; l < kc; ++l) {
      const float* s = b + l * ldb + j;
      for (i64 v = 0; 16 * v < wp; ++v)
        _mm512_store_ps(d + l * wp + 16 * v,
                        _mm512_maskz_loadu_ps(low_mask(w - 16 * v), s + 16 * v));
    }
  }
}

constexpr IsaKernels kAvx512 = {"avx512", kMR, kNR, kMC, kKC, kNC, &pack_a, &macro, &pack_b};

}  // namespace

const IsaKernels* isa_kernels_avx512() { return &kAvx512; }

}  // namespace anvil::kernels::blocked
