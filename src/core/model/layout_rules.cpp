// The frameworks' layout rules (layout_rules.hpp). Megatron-LM's, as its code states them:
// megatron/core/transformer/attention.py divides num_attention_heads and num_query_groups by the
// tensor-parallel world size (an uneven split is an assertion), the column- and row-parallel
// linear layers divide their split dimension the same way, and
// megatron/training/tokenizer's _vocab_size_with_padding pads the vocabulary to a multiple of
// make_vocab_size_divisible_by x tensor_model_parallel_size.
#include "core/model/layout_rules.hpp"

#include <fmt/format.h>

#include "core/model/model_config.hpp"
#include "core/util/error.hpp"

namespace gs {

const char* to_string(LayoutFramework f) {
  return f == LayoutFramework::Megatron ? "Megatron-LM" : "Hugging Face / PyTorch";
}

namespace {

// The multiple the vocabulary is padded to; 1: none.
int64_t vocab_multiple(const ModelConfig& c) {
  const int64_t by = c.vocab_divisible_by ? c.vocab_divisible_by
                     : c.layout == LayoutFramework::Megatron ? kMegatronVocabDivisibleBy
                                                               : 1;
  return by * c.tensor_parallel;
}

bool padded_by_rule(const ModelConfig& c) { return c.vocab_divisible_by || c.layout == LayoutFramework::Megatron; }

}  // namespace

int64_t padded_vocab(const ModelConfig& c) {
  if (c.vocab_size <= 0 || !padded_by_rule(c)) return c.vocab_size;
  const int64_t multiple = vocab_multiple(c);
  if (multiple <= 1) return c.vocab_size;
  return (c.vocab_size + multiple - 1) / multiple * multiple;
}

int64_t vocab_per_rank(const ModelConfig& c) {
  const int64_t tp = c.tensor_parallel > 0 ? c.tensor_parallel : 1;
  return (padded_vocab(c) + tp - 1) / tp;
}

std::string vocab_text(const ModelConfig& c) {
  const int64_t padded = padded_vocab(c);
  if (padded == c.vocab_size) return fmt::format("vocab={}", c.vocab_size);
  const int64_t by = c.vocab_divisible_by ? c.vocab_divisible_by : kMegatronVocabDivisibleBy;
  return fmt::format("vocab={} (padded to {} = a multiple of {} x TP {}, {})", c.vocab_size, padded, by,
                     c.tensor_parallel,
                     c.vocab_divisible_by ? "--make-vocab-size-divisible-by"
                                          : "Megatron-LM's make_vocab_size_divisible_by");
}

int64_t kv_heads_per_rank(const ModelConfig& c) {
  const int64_t tp = c.tensor_parallel > 0 ? c.tensor_parallel : 1;
  return c.kv_heads() >= tp ? c.kv_heads() / tp : 1;
}

std::vector<std::string> check_tensor_parallel(const ModelConfig& c) {
  std::vector<std::string> notes;
  const int64_t tp = c.tensor_parallel;
  if (tp <= 1) return notes;
  const bool megatron = c.layout == LayoutFramework::Megatron;
  const char* fw = to_string(c.layout);
  // Both frameworks split whole heads and whole FFN columns between the ranks.
  if (c.num_attention_heads % tp != 0)
    throw UsageError(fmt::format("--tensor-parallel {} does not divide num_attention_heads ({}): {} splits whole "
                                 "attention heads between the tensor-parallel ranks (num_attention_heads must be "
                                 "divisible by the tensor-parallel size)",
                                 tp, c.num_attention_heads, fw));
  if (!c.mla.enabled() && c.kv_heads() % tp != 0) {
    if (megatron)
      throw UsageError(fmt::format(
          "--tensor-parallel {} does not divide the key/value heads ({}): Megatron-LM's rule, num_query_groups must "
          "be divisible by tensor_model_parallel_size (it never replicates key/value heads); the step context "
          "(--step-context te or none) plans Megatron-LM's layout, --step-context eager or compile plans Hugging "
          "Face / PyTorch's",
          tp, c.kv_heads()));
    if (tp % c.kv_heads() != 0)
      throw UsageError(fmt::format("--tensor-parallel {} and the key/value heads ({}) do not split evenly: {} needs "
                                   "one to divide the other (split or replicated key/value heads)",
                                   tp, c.kv_heads(), fw));
    notes.push_back(fmt::format(
        "tensor parallel {} over {} key/value heads: each rank holds one key/value head, replicated {} times "
        "({}; Megatron-LM refuses this layout: num_query_groups must be divisible by tensor_model_parallel_size)",
        tp, c.kv_heads(), tp / c.kv_heads(), fw));
  }
  if (c.intermediate_size % tp != 0)
    throw UsageError(fmt::format("--tensor-parallel {} does not divide intermediate_size ({}): {} splits the MLP's "
                                 "columns evenly between the tensor-parallel ranks",
                                 tp, c.intermediate_size, fw));
  if (c.vocab_size > 0 && padded_vocab(c) % tp != 0)
    notes.push_back(fmt::format(
        "LM head: vocab {} not padded ({} pads nothing unless --make-vocab-size-divisible-by is given): the {} ranks "
        "hold {} rows each, the last fewer; the plan is the largest share",
        c.vocab_size, fw, tp, vocab_per_rank(c)));
  return notes;
}

}  // namespace gs
