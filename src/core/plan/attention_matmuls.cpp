#include "core/plan/attention_matmuls.hpp"

#include <fmt/format.h>

#include "core/plan/step_model.hpp"

namespace gs {

double AttentionMatmul::flops(bool causal) const {
  const double full = 2.0 * static_cast<double>(products) * static_cast<double>(m) * static_cast<double>(k) *
                      static_cast<double>(n);
  return causal ? full / 2.0 : full;
}

double AttentionMatmul::unfused_bytes() const {
  const double mk = static_cast<double>(m) * static_cast<double>(k), kn = static_cast<double>(k) * static_cast<double>(n),
               mn = static_cast<double>(m) * static_cast<double>(n);
  return 2.0 * static_cast<double>(products) * (mk + kn + mn);
}

std::string AttentionMatmul::shape() const { return fmt::format("{} x {}x{}x{}", products, m, k, n); }

double AttentionMatmuls::flops(Pass pass) const {
  double f = 0;
  for (const AttentionMatmul& r : rows)
    if (r.pass == pass) f += r.flops(shape.causal);
  return f;
}

double AttentionMatmuls::flops_per_layer(bool causal) const {
  double f = 0;
  for (const AttentionMatmul& r : rows) f += r.flops(causal);
  return f;
}

double AttentionMatmuls::recomputed_flops() const {
  return rows.empty() ? 0.0 : rows.front().flops(shape.causal);  // rows[0] is S = Q K^T
}

double AttentionMatmuls::fused_bytes(Pass pass) const {
  const AttentionShape& a = shape;
  const double b = static_cast<double>(a.batch), sq = static_cast<double>(a.seq_q), skv = static_cast<double>(a.seq_kv);
  const double hq = static_cast<double>(a.heads_q), hkv = static_cast<double>(a.heads_kv);
  const double q = b * sq * hq * static_cast<double>(a.d_qk), k = b * skv * hkv * static_cast<double>(a.d_qk),
               v = b * skv * hkv * static_cast<double>(a.d_v), o = b * sq * hq * static_cast<double>(a.d_v);
  const double stats = 4.0 * b * hq * sq;  // FP32 log-sum-exp per query row and head
  if (pass == Pass::Fprop) return 2.0 * (q + k + v + o) + stats;
  // Reads Q, K, V, O, dO and the statistics; writes dQ, dK, dV.
  return 2.0 * (q + k + v + o + o) + stats + 2.0 * (q + k + v);
}

AttentionMatmuls attention_matmuls(const ModelConfig& c) {
  AttentionMatmuls a;
  a.shape = attention_shape(c);
  a.layers = c.num_hidden_layers;
  const AttentionShape& s = a.shape;
  const int64_t p = s.batch * s.heads_q;
  // Forward: scores, then the weighted values.
  a.rows.push_back({Pass::Fprop, "S = Q K^T", p, s.seq_q, s.d_qk, s.seq_kv});
  a.rows.push_back({Pass::Fprop, "O = P V", p, s.seq_q, s.seq_kv, s.d_v});
  // Backward, in the order flash attention's backward runs them (S recomputed first, not a row).
  a.rows.push_back({Pass::Dgrad, "dV = P^T dO", p, s.seq_kv, s.seq_q, s.d_v});
  a.rows.push_back({Pass::Dgrad, "dP = dO V^T", p, s.seq_q, s.d_v, s.seq_kv});
  a.rows.push_back({Pass::Dgrad, "dQ = dS K", p, s.seq_q, s.seq_kv, s.d_qk});
  a.rows.push_back({Pass::Dgrad, "dK = dS^T Q", p, s.seq_kv, s.seq_q, s.d_qk});
  return a;
}

}  // namespace gs
