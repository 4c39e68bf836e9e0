// Device bodies of the FP8 quantization kernels, shared by the single-tensor launches
// (quantize.cu) and the multi-tensor launches (quantize_multi.cu), so both run the same code and
// give bit-identical results. Each body takes its block index and block count as arguments
// (bid_, nblk_) instead of blockIdx.x / gridDim.x: a single-tensor kernel passes its own grid, a
// multi-tensor kernel the tensor's slice of its grid.
//
// Only included by .cu files of the CUDA backend.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/quant/quant_common.cuh"
#include "cuda/quant/quantize.cuh"

namespace gs::cuda::qk {

using namespace qc;

constexpr int kThreads = 256;       // all streaming / tiled kernels
constexpr int kAmaxThreads = 512;   // amax partial kernel
constexpr int kAmaxMaxBlocks = 2048;
constexpr int kFinalThreads = 1024;  // amax final / delayed update

// ---------------------------------------------------------------------------------------------
// Scale sources for the per-tensor casts.
//   current: *src is the tensor's amax, scale = fmax/amax (fallback 1).
//   delayed: *src is the scale itself.
template <Fp8Kind K, bool kDelayed>
__device__ __forceinline__ float per_tensor_scale(const float* src) {
  const float v = *src;
  if constexpr (kDelayed) {
    return v;
  } else {
    return scale_from_amax(v, Fp8Info<K>::kMax, 1.f);
  }
}

// Delayed scaling: one atomicMax per block on the FP32 bits (amax >= 0) into history[*pos].
__device__ __forceinline__ void record_amax(uint32_t packed, float* history, const int* pos,
                                            uint32_t* red) {
  const uint32_t m = block_max_u32<kThreads>(fold_to_f32bits(packed), red);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned int*>(history + *pos), m);
}

// ---------------------------------------------------------------------------------------------
// amax: partial max per block -> workspace, then one block reduces the partials. Nothing
// accumulates across calls, so no zeroing is needed; the final kernel is launched with
// programmatic dependent launch so its launch overlaps the partial kernel.
__device__ __forceinline__ void amax_partial_body(const __nv_bfloat16* x, size_t n, uint32_t* partial, unsigned bid_, unsigned nblk_) {
  pdl_launch_dependents();  // the final kernel waits (griddepcontrol.wait) for our completion
  __shared__ uint32_t red[kAmaxThreads / 32];
  const uint16_t* xs = reinterpret_cast<const uint16_t*>(x);
  // Head (until 16-byte alignment) and tail elements are done by block 0 one per thread.
  const size_t mis = (reinterpret_cast<uintptr_t>(x) & 15u) / 2u;
  const size_t head = mis ? std::min<size_t>(n, 8u - mis) : 0u;
  const uint4* xv = reinterpret_cast<const uint4*>(xs + head);
  const size_t nv = (n - head) / 8u;
  const size_t tail0 = head + nv * 8u;

  uint32_t acc = 0;
  const size_t nthr = size_t(nblk_) * kAmaxThreads;
  size_t i = size_t(bid_) * kAmaxThreads + threadIdx.x;
  for (; i + 3 * nthr < nv; i += 4 * nthr) {
    const uint4 a = ldg16(xv + i), b = ldg16(xv + i + nthr), c = ldg16(xv + i + 2 * nthr),
                d = ldg16(xv + i + 3 * nthr);
    acc = absmax_acc(acc, a);
    acc = absmax_acc(acc, b);
    acc = absmax_acc(acc, c);
    acc = absmax_acc(acc, d);
  }
  for (; i < nv; i += nthr) acc = absmax_acc(acc, ldg16(xv + i));
  if (bid_ == 0) {
    if (threadIdx.x < head) acc = max_u16x2(acc, xs[threadIdx.x] & 0x7fffu);
    if (tail0 + threadIdx.x < n) acc = max_u16x2(acc, xs[tail0 + threadIdx.x] & 0x7fffu);
  }
  const uint32_t m = block_max_u32<kAmaxThreads>(fold_to_f32bits(acc), red);
  if (threadIdx.x == 0) partial[bid_] = m;
}

__device__ __forceinline__ void amax_final_body(const uint32_t* partial, int np, float* amax, unsigned bid_, unsigned nblk_) {
  (void)bid_, (void)nblk_;
  pdl_wait();
  __shared__ uint32_t red[kFinalThreads / 32];
  uint32_t m = 0;
  for (int i = threadIdx.x; i < np; i += kFinalThreads) m = max(m, partial[i]);
  m = block_max_u32<kFinalThreads>(m, red);
  if (threadIdx.x == 0) *amax = __uint_as_float(m);
}

// ---------------------------------------------------------------------------------------------
// Per-tensor cast, not transposed: a flat stream over rows*cols elements (the output has the
// source's layout). A warp handles spans of 64 chunks (64 x 8 elements): lane l loads chunks l
// and 32+l (two fully coalesced 512-byte loads), converts both to 8 FP8 bytes each, and one
// shuffle pairs the halves so that every lane writes 16 contiguous FP8 bytes (even lanes the
// first 256 bytes of the span, odd lanes the second).
template <Fp8Kind K>
__device__ __forceinline__ void cast_span(uint8_t* qs, int lane, float s, uint4 a, uint4 b) {
  const uint2 qa = quant8<K>(a, s), qb = quant8<K>(b, s);
  const bool odd = lane & 1;
  const uint2 send = odd ? qa : qb;
  uint2 recv;
  recv.x = __shfl_xor_sync(kFullMask, send.x, 1);
  recv.y = __shfl_xor_sync(kFullMask, send.y, 1);
  const uint4 out = odd ? make_uint4(recv.x, recv.y, qb.x, qb.y)
                        : make_uint4(qa.x, qa.y, recv.x, recv.y);
  const int chunk = odd ? 31 + lane : lane;  // even: chunks l,l+1; odd: chunks 32+l-1, 32+l
  stg16(qs + chunk * 8, out);
}

template <Fp8Kind K, bool kDelayed>
__device__ __forceinline__ void cast_rowwise_body(const uint4* x, size_t nchunks, const float* src, uint8_t* q,
                        float* scale_inv, float* history, const int* pos, unsigned bid_, unsigned nblk_) {
  __shared__ uint32_t red[kThreads / 32];
  const float s = per_tensor_scale<K, kDelayed>(src);
  if (bid_ == 0 && threadIdx.x == 0) *scale_inv = 1.f / s;
  const int lane = threadIdx.x & 31;
  const size_t gw = (size_t(bid_) * kThreads + threadIdx.x) >> 5;
  const size_t nw = (size_t(nblk_) * kThreads) >> 5;
  const size_t nspan = nchunks / 64;
  uint32_t acc = 0;
  size_t sp = gw;
  for (; sp + nw < nspan; sp += 2 * nw) {  // two spans per iteration: 4 loads in flight
    const uint4* p0 = x + sp * 64 + lane;
    const uint4* p1 = x + (sp + nw) * 64 + lane;
    const uint4 a0 = ldg16(p0), b0 = ldg16(p0 + 32), a1 = ldg16(p1), b1 = ldg16(p1 + 32);
    if constexpr (kDelayed) {
      acc = absmax_acc(acc, a0);
      acc = absmax_acc(acc, b0);
      acc = absmax_acc(acc, a1);
      acc = absmax_acc(acc, b1);
    }
    cast_span<K>(q + sp * 512, lane, s, a0, b0);
    cast_span<K>(q + (sp + nw) * 512, lane, s, a1, b1);
  }
  if (sp < nspan) {
    const uint4* p0 = x + sp * 64 + lane;
    const uint4 a0 = ldg16(p0), b0 = ldg16(p0 + 32);
    if constexpr (kDelayed) {
      acc = absmax_acc(acc, a0);
      acc = absmax_acc(acc, b0);
    }
    cast_span<K>(q + sp * 512, lane, s, a0, b0);
  }
  // Tail: fewer than 64 chunks, one chunk per thread, 8-byte stores.
  const size_t gt = size_t(bid_) * kThreads + threadIdx.x;
  const size_t nt = size_t(nblk_) * kThreads;
  for (size_t c = nspan * 64 + gt; c < nchunks; c += nt) {
    const uint4 v = ldg16(x + c);
    if constexpr (kDelayed) acc = absmax_acc(acc, v);
    stg8(q + c * 8, quant8<K>(v, s));
  }
  if constexpr (kDelayed) record_amax(acc, history, pos, red);
}

// ---------------------------------------------------------------------------------------------
// Transposed casts: tiles of 128 source rows x 64 source columns (the 128x128 variant does two
// 64-column halves), 256 threads.
//
// Phase 1: thread (cc = lane&7, g = warp*4 + lane>>3) loads rows r0+4g..r0+4g+3 of the 8
//   columns c0+8cc..+7 (four 16-byte loads; a warp instruction reads 4 full 128-byte rows).
//   Per column it packs the 4 FP8 bytes of its 4 rows into one word and stores it into the
//   shared tile, which holds the transposed FP8 tile: 64 rows (source columns) x 128 bytes
//   (source rows), i.e. 8 16-byte slots per row. Slot s of row c lives at physical slot
//   s ^ ((c >> 3) & 7) (XOR swizzle): the 32 word stores of a warp hit 32 different banks.
// Phase 2: each thread reads whole 16-byte slots (8 consecutive threads = one 128-byte row,
//   a permutation of its slots: conflict-free) and writes them to global memory: 8 threads
//   write one 128-byte output row segment.
// The next tile's loads are issued right after phase 1, so they overlap phase 2.
constexpr int kTR = 128;  // tile rows (source)
constexpr int kTC = 64;   // tile cols (source) per half

struct TileCoord {
  int r0, c0;
};

__device__ __forceinline__ TileCoord tile_coord(int t, int tiles_c, int tc_width) {
  const int tr = t / tiles_c;
  return {tr * kTR, (t - tr * tiles_c) * tc_width};
}

// Loads the 4 chunks of this thread for a 128 x 64 half-tile at (r0, c0). Out-of-range
// chunks (rows >= rows or columns >= cols) read as zero.
__device__ __forceinline__ void load_tile_chunks(const __nv_bfloat16* x, int rows, int cols,
                                                 int r0, int c0, int cc, int g, uint4 (&v)[4]) {
  const int col = c0 + cc * 8;
  const bool col_ok = col < cols;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = r0 + 4 * g + i;
    v[i] = (col_ok && r < rows) ? ldg16(x + size_t(r) * cols + col) : make_uint4(0, 0, 0, 0);
  }
}

// Converts the thread's 4x8 chunk with per-column scales sc[0..7] (or one scale) and stores
// the 8 packed column words into the swizzled transposed tile. `cbase` = tile row of column 0
// of this thread (multiple of 8), g = 4-row group.
template <Fp8Kind K, bool kPerCol>
__device__ __forceinline__ void stage_transposed(uint32_t* tile_words, const uint4 (&v)[4],
                                                 const float* sc, int cbase, int g) {
  const int swz = (cbase >> 3) & 7;
  const int word = (((g >> 2) ^ swz) << 2) + (g & 3);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float slo = kPerCol ? sc[2 * k] : sc[0];
    const float shi = kPerCol ? sc[2 * k + 1] : sc[0];
    const uint32_t w0 = (&v[0].x)[k], w1 = (&v[1].x)[k], w2 = (&v[2].x)[k], w3 = (&v[3].x)[k];
    const uint32_t lo = cvt_fp8x2<K>(bf16_lo(w0) * slo, bf16_lo(w1) * slo) |
                        (cvt_fp8x2<K>(bf16_lo(w2) * slo, bf16_lo(w3) * slo) << 16);
    const uint32_t hi = cvt_fp8x2<K>(bf16_hi(w0) * shi, bf16_hi(w1) * shi) |
                        (cvt_fp8x2<K>(bf16_hi(w2) * shi, bf16_hi(w3) * shi) << 16);
    tile_words[(cbase + 2 * k) * 32 + word] = lo;
    tile_words[(cbase + 2 * k + 1) * 32 + word] = hi;
  }
}

// Writes the kRowsOut rows (source columns c0..) of the staged tile to q (row stride `rows`).
// kVec: rows % 16 == 0, so every output row segment is 16-byte aligned (16-byte stores);
// otherwise the bytes are stored one by one (a separate instantiation: the fast path carries
// none of it).
template <int kRowsOut, bool kVec>
__device__ __forceinline__ void store_transposed(const uint4* tile, uint8_t* q, int rows,
                                                 int cols, int r0, int c0) {
#pragma unroll
  for (int it = 0; it < kRowsOut * 8 / kThreads; ++it) {
    const int u = it * kThreads + threadIdx.x;
    const int c = u >> 3, s = u & 7;
    const int oc = c0 + c;            // output row (source column)
    const int k0 = r0 + 16 * s;       // first output column (source row)
    if (oc < cols && k0 < rows) {
      const uint4 val = tile[c * 8 + (s ^ ((c >> 3) & 7))];
      uint8_t* dst = q + size_t(oc) * rows + k0;
      if constexpr (kVec) {
        stg16(dst, val);
      } else {  // rows % 16 != 0: output rows are not 16-byte aligned
        const int nb = rows - k0;
#pragma unroll
        for (int b = 0; b < 16; ++b)
          if (b < nb) dst[b] = uint8_t((&val.x)[b >> 2] >> (8 * (b & 3)));
      }
    }
  }
}

// All transposed variants in one kernel: tiles of 128 source rows x (64 * kH) source columns
// (kH halves of 64 columns, 4 16-byte loads per thread each, all issued before first use).
//   kModeCur / kModeDel: per-tensor scale (current: from *src = amax; delayed: *src = scale,
//     plus the fused amax record).
//   kModeB1: 1x128 blocks down the source columns: one block per tile column. Column maxima:
//     within the thread (4 rows), across the 4 row groups of a warp (2 shuffles), across the 8
//     warps (shared memory); then kTW threads compute the kTW scales.
//   kModeB128: one 128x128 block per tile (kH == 2), block max.
// One tile per block (grid = tile count): the hardware block scheduler balances the SMs, and the
// loads of newly started blocks overlap the barriers and stores of finishing ones. (A
// persistent grid with the next tile prefetched measured ~7% slower on the H100: the last
// round of tiles leaves SMs idle and each block stalls at its barriers.)
enum : int { kModeCur = 0, kModeDel = 1, kModeB1 = 2, kModeB128 = 3 };

// Dual output: source row r0+4g+i, columns c0+8cc..+7 of this thread, quantized with scale s,
// stored into the source-layout copy (8 lanes write 64 contiguous bytes of a row).
template <Fp8Kind K>
__device__ __forceinline__ void store_rowwise(uint8_t* q_row, int rows, int cols, int r, int col,
                                              uint4 v, float s) {
  if (r < rows && col < cols) stg8(q_row + size_t(r) * cols + col, quant8<K>(v, s));
}

//
// kDual (training mode): the same read also writes the source-layout copy q_row [rows, cols]
// with its scales (scale_row), straight from registers with 8-byte stores: per-tensor modes with
// the tensor scale; kModeB128 with the tile's scale; kModeB1 (kH == 2: a tile row is one 1x128
// block) with a per-row scale from a 3-step shuffle max over the 8 lanes that hold the row.
template <Fp8Kind K, int kMode, int kH, bool kVec, bool kDual>
__device__ __forceinline__ void transpose_body(const __nv_bfloat16* x, int rows, int cols, const float* src, uint8_t* q,
                     float* scale_inv, float* history, const int* pos, uint8_t* q_row,
                     float* scale_row, bool pow2, unsigned bid_, unsigned nblk_) {
  static_assert(kH == 1 || kH == 2, "halves");
  static_assert(kMode != kModeB128 || kH == 2, "128x128 blocks need 128-column tiles");
  static_assert(!kDual || kMode != kModeB1 || kH == 2, "dual 1x128 needs 128-column tiles");
  constexpr int kTW = kTC * kH;  // tile width (source columns) = output rows per tile
  constexpr bool kB1 = kMode == kModeB1;
  __shared__ uint4 tile[kTW * 8];
  __shared__ uint4 red4[kB1 ? 8 * kH * 8 : 1];     // [warp][half][cc]: packed column maxima
  __shared__ float4 col_scale[kB1 ? kTW / 4 : 1];  // per-column scales of the tile
  __shared__ uint32_t red[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int cc = lane & 7, g = warp * 4 + (lane >> 3);
  const int tiles_c = (cols + kTW - 1) / kTW;
  const int tiles_r = (rows + kTR - 1) / kTR;
  const int ntiles = tiles_r * tiles_c;
  uint32_t* tile_words = reinterpret_cast<uint32_t*>(tile);
  float s_tensor = 1.f;
  if constexpr (kMode == kModeCur || kMode == kModeDel) {
    s_tensor = per_tensor_scale<K, kMode == kModeDel>(src);
    if (bid_ == 0 && threadIdx.x == 0) {
      *scale_inv = 1.f / s_tensor;
      if constexpr (kDual) *scale_row = 1.f / s_tensor;
    }
  }
  uint32_t acc_t = 0;  // delayed: packed |x| max of the tile
  uint4 v[kH][4];
  const int t = bid_;
  if (t < ntiles) {  // block-uniform (one tile per block)
    const TileCoord tc = tile_coord(t, tiles_c, kTW);
#pragma unroll
    for (int h = 0; h < kH; ++h) load_tile_chunks(x, rows, cols, tc.r0, tc.c0 + h * kTC, cc, g, v[h]);
    if constexpr (kMode == kModeCur || kMode == kModeDel) {
      if constexpr (kMode == kModeDel) {
#pragma unroll
        for (int h = 0; h < kH; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc_t = absmax_acc(acc_t, v[h][i]);
      }
#pragma unroll
      for (int h = 0; h < kH; ++h)
        stage_transposed<K, false>(tile_words, v[h], &s_tensor, h * kTC + cc * 8, g);
      if constexpr (kDual) {
#pragma unroll
        for (int h = 0; h < kH; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            store_rowwise<K>(q_row, rows, cols, tc.r0 + 4 * g + i, tc.c0 + h * kTC + cc * 8, v[h][i], s_tensor);
      }
    } else if constexpr (kMode == kModeB128) {
      uint32_t acc = 0;
#pragma unroll
      for (int h = 0; h < kH; ++h)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc = absmax_acc(acc, v[h][i]);
      const uint32_t m = block_max_u32<kThreads>(fold_to_f32bits(acc), red);
      const float s = block_scale(__uint_as_float(m), Fp8Info<K>::kMax, pow2);
      const int L4 = (tiles_r + 3) / 4 * 4;
      if (threadIdx.x == 0) scale_inv[size_t(tc.c0 / 128) * L4 + tc.r0 / 128] = 1.f / s;
#pragma unroll
      for (int h = 0; h < kH; ++h)
        stage_transposed<K, false>(tile_words, v[h], &s, h * kTC + cc * 8, g);
      if constexpr (kDual) {
        const int L4r = (tiles_c + 3) / 4 * 4;  // the source-layout copy: outer = rows, K = cols
        if (threadIdx.x == 0) scale_row[size_t(tc.r0 / 128) * L4r + tc.c0 / 128] = 1.f / s;
#pragma unroll
        for (int h = 0; h < kH; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            store_rowwise<K>(q_row, rows, cols, tc.r0 + 4 * g + i, tc.c0 + h * kTC + cc * 8, v[h][i], s);
      }
    } else {  // kModeB1
      if constexpr (kDual) {
        // Row blocks: tile row r is the 1x128 block (r, c0/128) of the source-layout copy.
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          uint32_t acc = 0;
#pragma unroll
          for (int h = 0; h < kH; ++h) acc = absmax_acc(acc, v[h][i]);
          uint32_t m = fold_to_f32bits(acc);
          m = max(m, __shfl_xor_sync(kFullMask, m, 1));
          m = max(m, __shfl_xor_sync(kFullMask, m, 2));
          m = max(m, __shfl_xor_sync(kFullMask, m, 4));
          const float sr = block_scale(__uint_as_float(m), Fp8Info<K>::kMax, pow2);
          const int r = tc.r0 + 4 * g + i;
          if (cc == 0 && r < rows) scale_row[size_t(tc.c0 / 128) * rows + r] = 1.f / sr;
#pragma unroll
          for (int h = 0; h < kH; ++h) store_rowwise<K>(q_row, rows, cols, r, tc.c0 + h * kTC + cc * 8, v[h][i], sr);
        }
      }
#pragma unroll
      for (int h = 0; h < kH; ++h) {
        // per-column |x| max over this thread's 4 rows: word k holds columns 2k (lo), 2k+1 (hi)
        uint32_t m[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const uint32_t msk = 0x7fff7fffu;
          m[k] = max_u16x2(max_u16x2((&v[h][0].x)[k] & msk, (&v[h][1].x)[k] & msk),
                           max_u16x2((&v[h][2].x)[k] & msk, (&v[h][3].x)[k] & msk));
          m[k] = max_u16x2(m[k], __shfl_xor_sync(kFullMask, m[k], 8));
          m[k] = max_u16x2(m[k], __shfl_xor_sync(kFullMask, m[k], 16));
        }
        if (lane < 8) red4[(warp * kH + h) * 8 + cc] = make_uint4(m[0], m[1], m[2], m[3]);
      }
      __syncthreads();
      if (threadIdx.x < kTW) {
        const int c = threadIdx.x, h = c / kTC, cl = c % kTC;
        const int ccc = cl >> 3, k = (cl & 7) >> 1, sh = (cl & 1) * 16;
        const uint32_t* rw = reinterpret_cast<const uint32_t*>(red4);
        uint32_t mx = 0;
#pragma unroll
        for (int w = 0; w < 8; ++w)
          mx = max(mx, (rw[((w * kH + h) * 8 + ccc) * 4 + k] >> sh) & 0xffffu);
        const float sc = block_scale(__uint_as_float(mx << 16), Fp8Info<K>::kMax, pow2);
        reinterpret_cast<float*>(col_scale)[c] = sc;
        const int oc = tc.c0 + c;
        if (oc < cols) scale_inv[size_t(tc.r0 / kTR) * cols + oc] = 1.f / sc;
      }
      __syncthreads();
#pragma unroll
      for (int h = 0; h < kH; ++h) {
        float sc[8];
        const float4 a = col_scale[h * (kTC / 4) + cc * 2], b = col_scale[h * (kTC / 4) + cc * 2 + 1];
        sc[0] = a.x; sc[1] = a.y; sc[2] = a.z; sc[3] = a.w;
        sc[4] = b.x; sc[5] = b.y; sc[6] = b.z; sc[7] = b.w;
        stage_transposed<K, true>(tile_words, v[h], sc, h * kTC + cc * 8, g);
      }
    }
    __syncthreads();
    store_transposed<kTW, kVec>(tile, q, rows, cols, tc.r0, tc.c0);
  }
  if constexpr (kMode == kModeDel) record_amax(acc_t, history, pos, red);
}

// ---------------------------------------------------------------------------------------------
// 1x128 block scaling, not transposed: outer = rows, K = cols. A unit is one (row, 128-column
// block), owned by a half-warp: 16 lanes x 8 elements, a 4-step shuffle max inside the half,
// one scale, 8-byte FP8 stores (16 lanes write 128 contiguous bytes). A warp owns a group of
// 2*kU consecutive units (half h takes units 2j+h): kU 16-byte loads per lane, all issued
// before the first use, over 2*kU*128 contiguous columns when the group lies in one row. The
// (row, block) of a unit is advanced incrementally (one division per group). The host launches
// one group per warp (non-persistent grid).
__device__ __forceinline__ void advance_unit(unsigned& row, unsigned& kb, unsigned nkb) {
  kb += 2u;  // the next unit of this half-warp
  if (kb >= nkb) {
    kb -= nkb;
    ++row;
    if (kb >= nkb) {  // nkb == 1
      kb -= nkb;
      ++row;
    }
  }
}

template <int kU>
__device__ __forceinline__ void b1_load_group(const __nv_bfloat16* x, int cols, unsigned units,
                                              unsigned nkb, unsigned grp, int half, int li,
                                              uint4 (&v)[kU]) {
  const unsigned u0 = grp * (2u * kU) + unsigned(half);
  unsigned row = u0 / nkb, kb = u0 - row * nkb;
#pragma unroll
  for (int j = 0; j < kU; ++j) {
    const int col = int(kb) * 128 + li * 8;
    v[j] = (u0 + 2u * j < units && col < cols) ? ldg16(x + size_t(row) * cols + col)
                                                : make_uint4(0, 0, 0, 0);
    advance_unit(row, kb, nkb);
  }
}

template <Fp8Kind K, int kU>
__device__ __forceinline__ void b1_process_group(int rows, int cols, unsigned units, unsigned nkb,
                                                 unsigned grp, int half, int li,
                                                 const uint4 (&v)[kU], uint8_t* q,
                                                 float* scale_inv, bool pow2) {
  const unsigned u0 = grp * (2u * kU) + unsigned(half);
  unsigned row = u0 / nkb, kb = u0 - row * nkb;
#pragma unroll
  for (int j = 0; j < kU; ++j) {
    const bool ok = u0 + 2u * j < units;
    const int col = int(kb) * 128 + li * 8;
    uint32_t m = fold_to_f32bits(absmax_acc(0u, v[j]));
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(kFullMask, m, o));
    const float s = block_scale(__uint_as_float(m), Fp8Info<K>::kMax, pow2);
    if (ok && li == 0) scale_inv[size_t(kb) * rows + row] = 1.f / s;
    if (ok && col < cols) stg8(q + size_t(row) * cols + col, quant8<K>(v[j], s));
    advance_unit(row, kb, nkb);
  }
}

template <Fp8Kind K, int kU>
__device__ __forceinline__ void block1x128_rowwise_body(const __nv_bfloat16* x, int rows, int cols, uint8_t* q,
                                 float* scale_inv, bool pow2, unsigned bid_, unsigned nblk_) {
  const int lane = threadIdx.x & 31, half = lane >> 4, li = lane & 15;
  const unsigned nkb = (unsigned(cols) + 127u) / 128u;
  const unsigned units = unsigned(rows) * nkb;
  const unsigned groups = (units + 2u * kU - 1u) / (2u * kU);
  const unsigned gw = (bid_ * kThreads + threadIdx.x) >> 5;
  const unsigned nw = (nblk_ * kThreads) >> 5;
  uint4 v[kU];
  for (unsigned grp = gw; grp < groups; grp += nw) {  // warp-uniform; once with the host's grid
    b1_load_group<kU>(x, cols, units, nkb, grp, half, li, v);
    b1_process_group<K, kU>(rows, cols, units, nkb, grp, half, li, v, q, scale_inv, pow2);
  }
}

// ---------------------------------------------------------------------------------------------
// 128x128 block scaling. One block per 128x128 source tile (the host launches one block per
// tile; the loop is a grid-stride fallback): 8 16-byte loads per thread, block max, one scale,
// cast.
//
// Not transposed: outer = rows, K = cols. Chunk u = i*256 + tid: row u>>4, column chunk u&15
// (a warp instruction reads 2 full 256-byte rows); 8-byte stores (16 lanes = 128 bytes).
template <Fp8Kind K>
__device__ __forceinline__ void block128_rowwise_body(const __nv_bfloat16* x, int rows, int cols, uint8_t* q,
                            float* scale_inv, bool pow2, unsigned bid_, unsigned nblk_) {
  __shared__ uint32_t red[kThreads / 32];
  const int tiles_c = (cols + 127) / 128;
  const int ntiles = ((rows + 127) / 128) * tiles_c;
  const int L4 = (tiles_c + 3) / 4 * 4;
  const int cc = threadIdx.x & 15, rr = threadIdx.x >> 4;
  for (int t = bid_; t < ntiles; t += nblk_) {
    const int tr = t / tiles_c, tcol = t - tr * tiles_c;
    const int r0 = tr * 128, col = tcol * 128 + cc * 8;
    const bool col_ok = col < cols;
    uint4 v[8];
    uint32_t acc = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int r = r0 + 16 * i + rr;
      v[i] = (col_ok && r < rows) ? ldg16(x + size_t(r) * cols + col) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) acc = absmax_acc(acc, v[i]);
    const uint32_t m = block_max_u32<kThreads>(fold_to_f32bits(acc), red);
    const float s = block_scale(__uint_as_float(m), Fp8Info<K>::kMax, pow2);
    if (threadIdx.x == 0) scale_inv[size_t(tr) * L4 + tcol] = 1.f / s;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int r = r0 + 16 * i + rr;
      if (col_ok && r < rows) stg8(q + size_t(r) * cols + col, quant8<K>(v[i], s));
    }
  }
}
// ---------------------------------------------------------------------------------------------
// Delayed scaling history step (one block): m = max(history); scale = fmax/m (m == 0 or not
// finite: keep the previous scale); pos = (pos+1) % len; history[pos] = 0 for the next step.
__device__ __forceinline__ void delayed_update_body(float* history, int len, int* pos, float fmax, float* scale, unsigned bid_, unsigned nblk_) {
  (void)bid_, (void)nblk_;
  __shared__ uint32_t red[kFinalThreads / 32];
  uint32_t m = 0;
  const unsigned* hb = reinterpret_cast<const unsigned*>(history);
  for (int i = threadIdx.x; i < len; i += kFinalThreads) m = max(m, hb[i]);
  m = block_max_u32<kFinalThreads>(m, red);  // ends with a barrier: all reads are done
  if (threadIdx.x == 0) {
    *scale = scale_from_amax(__uint_as_float(m), fmax, *scale);
    int p = *pos + 1;
    if (p >= len) p = 0;
    *pos = p;
    history[p] = 0.f;
  }
}

// ---- host helpers (quantize.cu) ----------------------------------------------------------------
// Resident-block capacity of the whole device for a kernel (occupancy x SM count), cached.
int device_blocks(const void* kernel, int threads, size_t smem_dynamic = 0);
// Blocks of the amax partial pass over n elements (before the device cap).
size_t amax_blocks_needed(size_t n);

}  // namespace gs::cuda::qk
