#include "core/model/attention_shape.hpp"

namespace gs {

std::string check_attention_shape(const AttentionShape& a) {
  if (a.batch < 1 || a.seq_q < 1 || a.seq_kv < 1 || a.heads_q < 1 || a.heads_kv < 1 || a.d_qk < 1 || a.d_v < 1)
    return "attention shape: batch, sequence lengths, heads and head dims must all be positive";
  if (a.heads_q % a.heads_kv != 0)
    return "attention shape: heads_q (" + std::to_string(a.heads_q) + ") is not a multiple of heads_kv (" +
           std::to_string(a.heads_kv) + ")";
  return {};
}

double attention_score_pairs(const AttentionShape& a) {
  const double pairs = static_cast<double>(a.batch) * static_cast<double>(a.heads_q) * static_cast<double>(a.seq_q) *
                       static_cast<double>(a.seq_kv);
  return a.causal ? pairs / 2.0 : pairs;
}

double attention_fwd_flops(const AttentionShape& a) {
  return 2.0 * attention_score_pairs(a) * static_cast<double>(a.d_qk + a.d_v);
}

double attention_bwd_flops(const AttentionShape& a) {
  return 2.0 * attention_score_pairs(a) * static_cast<double>(3 * a.d_qk + 2 * a.d_v);
}

}  // namespace gs
