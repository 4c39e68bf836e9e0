// The rules a parallel layout must meet for a model, each named by the framework that enforces it
// (Megatron-LM / Megatron-Core, Transformer Engine, PyTorch FSDP): world size, pipeline stages and
// virtual stages against the layers, micro-batches of the interleaved schedule, context parallel
// against the sequence and the heads, experts per rank, the expert folding, the global batch.
// Tensor-parallel splits of heads, KV groups and FFN are the model's own rules (validate() in
// core/model/model_config.hpp), checked on the per-rank config.
//
// Also the per-rank model a layout gives one GPU: its tensor-parallel slice, its micro-batch, its
// share of the sequence under context parallelism, its experts.
#pragma once
#include <cstdint>
#include <string>

#include "core/model/model_config.hpp"
#include "core/step/parallel_layout.hpp"

namespace gs {

// The first rule `l` breaks for `c` ("Megatron-LM: num_layers (80) is not divisible by the pipeline
// stages x virtual stages (3 x 1)"), or "" when the layout is valid. `gpus` (0: not given) is the
// job's GPU count, which must be the product of the sizes.
std::string layout_problem(const ModelConfig& c, const ParallelLayout& l, int64_t gpus = 0);
// The same as a UsageError (exit 2).
void check_layout(const ModelConfig& c, const ParallelLayout& l, int64_t gpus = 0);

// The layers of model chunk k of stage s (chunk k p + s of the p v chunks): the first layer's index
// and how many. Divisible layouts split evenly; an uneven one spreads the remainder over the chunks
// after the first (which also holds the embedding).
struct ChunkLayers {
  int64_t first = 0, count = 0;
};
ChunkLayers chunk_layers(const ModelConfig& c, const ParallelLayout& l, int64_t stage, int64_t chunk);

// One GPU's model under `l`: tensor_parallel = tp, micro_batch_size = mb, sequence_length = the
// sequence over cp (what each rank's GEMMs see), expert_parallel = ep. The layout must be valid.
ModelConfig rank_config(const ModelConfig& c, const ParallelLayout& l);
// The same for the routed experts' GEMMs when expert-tensor parallelism differs from tp: their FFN
// split by etp, and the tokens that reach the dispatcher (the sequence-parallel shard, gathered
// over etp): sequence x etp / tp per rank.
ModelConfig expert_rank_config(const ModelConfig& c, const ParallelLayout& l);

}  // namespace gs
