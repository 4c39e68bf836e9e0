// The layout rules of the framework a training step runs under, each rule named: which
// tensor-parallel splits the framework accepts and how it pads the LM head's vocabulary.
//
// - Megatron-LM (with Transformer Engine; the step contexts te and none: the training default):
//   attention heads and query groups (key/value heads) are split between the tensor-parallel
//   ranks and must divide by the TP size; the vocabulary is padded to a multiple of
//   make_vocab_size_divisible_by (128 by default) x TP, at any TP, including TP 1.
// - Hugging Face / PyTorch (the step contexts eager and compile): linear layers are sharded as they
//   are; the vocabulary is not padded (each rank holds ceil(V / TP) rows, as torch.chunk splits),
//   and key/value heads fewer than the ranks are replicated (each rank holds one).
//
// One place for such rules: pipeline, expert and data-parallel rules belong here too.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gs {

struct ModelConfig;

enum class LayoutFramework { Megatron, PyTorch };
const char* to_string(LayoutFramework f);  // "Megatron-LM", "Hugging Face / PyTorch"

// Megatron-LM's --make-vocab-size-divisible-by default.
constexpr int64_t kMegatronVocabDivisibleBy = 128;

// The vocabulary the LM head's GEMMs cover, all ranks together: Megatron pads vocab_size to a
// multiple of make_vocab_size_divisible_by (ModelConfig::vocab_divisible_by, 0 = 128) x TP;
// PyTorch pads only when --make-vocab-size-divisible-by is given (then as Megatron does).
int64_t padded_vocab(const ModelConfig& c);
// The LM head's output rows on one rank (the largest share): padded_vocab / TP, or
// ceil(padded_vocab / TP) where the framework shards an uneven vocabulary (PyTorch).
int64_t vocab_per_rank(const ModelConfig& c);
// "vocab=50257 (padded to 50304 = a multiple of 128 x TP 1, Megatron-LM's make_vocab_size_divisible_by)"
std::string vocab_text(const ModelConfig& c);

// Key/value heads on one tensor-parallel rank: kv_heads / TP, or 1 where PyTorch replicates
// fewer key/value heads than ranks.
int64_t kv_heads_per_rank(const ModelConfig& c);

// The tensor-parallel rules of c.layout, checked before a plan is built: a split the framework
// refuses throws UsageError naming the framework's rule; a split it runs differently from
// Megatron-LM (replicated key/value heads, an unpadded vocabulary shared unevenly) is returned as
// a note for the report's header.
std::vector<std::string> check_tensor_parallel(const ModelConfig& c);

}  // namespace gs
