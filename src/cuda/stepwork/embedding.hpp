// The token embedding, BF16 as PyTorch's nn.Embedding runs it in a BF16 model:
//   forward   out[t, :] = table[ids[t], :], one warp per token row (index_select's gather);
//   backward  the BF16 table gradient zeroed (PyTorch allocates it with zeros: a pass over the whole
//             [vocab, hidden] table, the larger part of the bytes when the vocabulary is much larger
//             than the tokens), then every token's gradient row added into its table row.
// The add is sort-free: BF16x2 atomic adds, one warp per token row. PyTorch's
// embedding_dense_backward (more than 3072 tokens) instead sorts the ids, sums each run of equal
// ids into FP32 partial rows and writes each table row once: the same zeroing pass and the same
// rows read; it writes the touched rows once (BF16) where this adds into them (read and write),
// and it moves the FP32 partials (about 8 bytes per token value) and sorts the ids on top. A token
// that repeats is rounded to BF16 at each add here, once per row there.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace gs::cuda::stepwork {

void embedding_forward(const __nv_bfloat16* table, const int64_t* ids, int64_t rows, int64_t cols,
                       __nv_bfloat16* out, cudaStream_t s);
void embedding_backward_zero(__nv_bfloat16* grad_table, int64_t vocab, int64_t cols, cudaStream_t s);
// cols must be even (BF16x2 atomics).
void embedding_backward_add(const __nv_bfloat16* grad_out, const int64_t* ids, int64_t rows, int64_t cols,
                            __nv_bfloat16* grad_table, cudaStream_t s);

}  // namespace gs::cuda::stepwork
