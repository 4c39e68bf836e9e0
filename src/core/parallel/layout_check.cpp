#include "core/parallel/layout_check.hpp"

#include <fmt/format.h>

#include "core/model/moe_config.hpp"
#include "core/util/error.hpp"

namespace gs {

namespace {

// The per-rank config before validate(): the model's own tensor-parallel rules run on it.
ModelConfig sliced(const ModelConfig& c, const ParallelLayout& l, int64_t tp, int64_t micro_batch, int64_t seq) {
  ModelConfig r = c;
  r.tensor_parallel = tp;
  r.micro_batch_size = micro_batch;
  r.sequence_length = seq;
  r.micro_batch_from = r.sequence_from = "the parallel layout";
  if (r.moe.enabled()) {
    r.moe.expert_parallel = l.ep;
    r.moe.parallel_source = "the parallel layout";
  }
  return r;
}

}  // namespace

std::string layout_problem(const ModelConfig& c, const ParallelLayout& l, int64_t gpus) {
  const int64_t layers = c.num_hidden_layers;
  const int64_t seq = c.sequence_length;
  if (gpus > 0 && l.world() != gpus)
    return fmt::format("Megatron-LM: the world size ({} GPUs) must be TP x PP x CP x DP = {} x {} x {} x {} = {}", gpus,
                       l.tp, l.pp, l.cp, l.dp, l.world());
  if (l.vpp > 1 && l.pp < 2)
    return fmt::format("Megatron-LM: virtual pipeline stages ({}) need pipeline parallelism of 2 or more", l.vpp);
  if (layers < l.pp * l.vpp)
    return fmt::format("Megatron-LM: {} layers cannot fill {} pipeline stages x {} virtual stages", layers, l.pp, l.vpp);
  if (layers % (l.pp * l.vpp) != 0 && !l.uneven_pipeline)
    return l.vpp > 1 ? fmt::format("Megatron-LM: num_layers ({}) is not divisible by pipeline stages x virtual stages "
                                   "({} x {}): each model chunk holds the same number of layers",
                                   layers, l.pp, l.vpp)
                     : fmt::format("Megatron-LM: num_layers ({}) is not divisible by the pipeline-parallel size ({})",
                                   layers, l.pp);
  if (l.tp > 1 && l.sequence_parallel && (l.micro_batch * seq / l.cp) % l.tp != 0)
    return fmt::format("Megatron-LM: sequence parallelism splits the {} tokens of a micro-batch over TP {}: not divisible",
                       l.micro_batch * seq / l.cp, l.tp);
  if (l.cp > 1) {
    if (seq % (2 * l.cp) != 0)
      return fmt::format("Transformer Engine: context parallelism splits the sequence ({}) into 2 x CP = {} load-balanced "
                         "chunks: not divisible",
                         seq, 2 * l.cp);
    if (l.cp_comm == CpComm::AllToAll) {
      const int64_t heads = c.num_attention_heads / l.tp, kv = std::max<int64_t>(1, c.kv_heads() / l.tp);
      if (heads % l.cp != 0 || kv % l.cp != 0)
        return fmt::format("Transformer Engine (a2a context parallelism): the heads per TP rank ({} query, {} key-value) "
                           "must be divisible by CP {}",
                           heads, kv, l.cp);
    }
  }
  const bool moe = c.moe.enabled();
  if (!moe && l.ep > 1) return fmt::format("expert parallelism ({}) needs a model with experts", l.ep);
  if (!moe && l.etp > 0 && l.etp != l.tp)
    return fmt::format("expert-tensor parallelism ({}) needs a model with experts", l.etp);
  if (moe) {
    if (c.moe.num_experts % l.ep != 0)
      return fmt::format("Megatron-Core: num_moe_experts ({}) is not divisible by the expert-parallel size ({})",
                         c.moe.num_experts, l.ep);
    if (l.expert_dp() == 0)
      return fmt::format("Megatron-Core (MoE parallel folding): TP x CP x DP = {} is not divisible by ETP x EP = {} x {}",
                         l.tp * l.cp * l.dp, l.expert_tp(), l.ep);
    if (expert_ffn(c) % l.expert_tp() != 0)
      return fmt::format("Megatron-Core: the expert FFN size ({}) is not divisible by the expert-tensor-parallel size ({})",
                         expert_ffn(c), l.expert_tp());
  }
  if (l.batch() % (l.micro_batch * l.dp) != 0)
    return fmt::format("Megatron-LM: the global batch ({}) is not divisible by micro-batch x data parallel ({} x {})",
                       l.batch(), l.micro_batch, l.dp);
  if (l.vpp > 1 && l.micro_batches() % l.pp != 0)
    return fmt::format("Megatron-LM: the interleaved schedule needs the micro-batches per step ({}) to be a multiple of "
                       "the pipeline-parallel size ({})",
                       l.micro_batches(), l.pp);
  if (is_fsdp(l.sharding) && l.pp > 1 && l.vpp > 1)
    return "PyTorch FSDP with interleaved virtual stages is not modelled";
  try {
    validate(sliced(c, l, l.tp, l.micro_batch, seq / l.cp));
    if (moe && l.expert_tp() != l.tp) validate(expert_rank_config(c, l));
  } catch (const UsageError& e) {
    return fmt::format("Megatron-LM (TP {}): {}", l.tp, e.what());
  }
  return "";
}

void check_layout(const ModelConfig& c, const ParallelLayout& l, int64_t gpus) {
  const std::string why = layout_problem(c, l, gpus);
  if (!why.empty()) throw UsageError(fmt::format("layout {} refused: {}", short_string(l), why));
}

ChunkLayers chunk_layers(const ModelConfig& c, const ParallelLayout& l, int64_t stage, int64_t chunk) {
  const int64_t n = l.pp * l.vpp, j = chunk * l.pp + stage;
  const int64_t base = c.num_hidden_layers / n, extra = c.num_hidden_layers % n;
  // Chunks 1..extra hold one layer more (chunk 0 keeps the embedding and base layers).
  auto first_of = [&](int64_t i) { return i * base + std::min<int64_t>(std::max<int64_t>(i - 1, 0), extra); };
  const int64_t count = base + (j >= 1 && j <= extra ? 1 : 0);
  return {first_of(j), count};
}

ModelConfig rank_config(const ModelConfig& c, const ParallelLayout& l) {
  return sliced(c, l, l.tp, l.micro_batch, c.sequence_length / l.cp);
}

ModelConfig expert_rank_config(const ModelConfig& c, const ParallelLayout& l) {
  // Tokens reaching the dispatcher: the micro-batch's sequence shard (mb x seq / cp), split over TP
  // by sequence parallelism and gathered again over ETP; planned as one sequence of that length.
  const int64_t tokens = l.micro_batch * (c.sequence_length / l.cp) * l.expert_tp() / l.tp;
  return sliced(c, l, l.expert_tp(), 1, std::max<int64_t>(1, tokens));
}

}  // namespace gs
