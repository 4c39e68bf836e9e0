// The collectives of a parallel layout: sizes derived by hand for known models, nccl-tests bus
// bandwidth, bad layouts and too few GPUs refused, the measurement loop over a fake engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "core/node/collectives.hpp"
#include "core/node/comm_records.hpp"
#include "core/report/report.hpp"
#include "core/util/error.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

Plan plan_of(const std::string& preset, int64_t tp = 1, const std::string& routing = "", int64_t ep = 0) {
  ModelConfig c = find_preset(preset).config;
  c.tensor_parallel = tp;
  if (!routing.empty()) c.moe.routing = routing;
  if (ep > 0) c.moe.expert_parallel = ep;
  return build_model_plan(c);
}

const Collective& find(const std::vector<Collective>& cs, CommGroup g, CollKind k, const std::string& what_prefix) {
  for (const Collective& c : cs)
    if (c.group == g && c.kind == k && c.what.rfind(what_prefix, 0) == 0) return c;
  throw std::runtime_error("no collective " + what_prefix);
}

int count(const std::vector<Collective>& cs, CommGroup g, CollKind k) {
  int n = 0;
  for (const Collective& c : cs) n += c.group == g && c.kind == k;
  return n;
}

constexpr int64_t MiB = 1048576;

}  // namespace

// Llama 3 8B, TP 2 with sequence parallelism, 2 x 8192 tokens: every all-gather and
// reduce-scatter moves the 16384 x 4096 activation, 128 MiB in BF16 and 64 MiB in FP8.
TEST(Collectives, Llama8bTensorSequenceParallel) {
  const Plan p = plan_of("llama-3-8b", 2);
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  EXPECT_EQ(l.gpus(), 2);
  const std::vector<Collective> cs = plan_collectives(p, l);
  // Per block: forward AG + RS; backward AG of the output gradient, AG of the input again, RS.
  ASSERT_EQ(cs.size(), 10u);
  EXPECT_EQ(count(cs, CommGroup::Tensor, CollKind::AllGather), 6);
  EXPECT_EQ(count(cs, CommGroup::Tensor, CollKind::ReduceScatter), 4);
  for (const Collective& c : cs) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.ranks, 2);
    EXPECT_EQ(c.scope, Scope::Layer);
    EXPECT_EQ(times_per_step(c, p), 32);
    EXPECT_EQ(c.size_bytes(CommType::Bf16), 16384 * 4096 * 2);
    EXPECT_EQ(c.size_bytes(CommType::Bf16), 128 * MiB);
    // Gathers send FP8 under FP8 recipes; reductions stay BF16.
    EXPECT_EQ(c.type_fp8, c.kind == CollKind::AllGather ? CommType::Fp8 : CommType::Bf16);
  }
  const Collective& ag = cs[0];
  EXPECT_EQ(ag.what, "input of attention");
  ASSERT_TRUE(ag.overlaps.has_value());
  EXPECT_EQ(ag.overlaps->op, Op::Qkv);
  EXPECT_EQ(ag.overlaps->pass, Pass::Fprop);
  EXPECT_EQ(ag.size_bytes(CommType::Fp8), 64 * MiB);
  // Forward first (attention, MLP), then backward with the MLP before attention.
  EXPECT_FALSE(cs[3].backward);
  EXPECT_TRUE(cs[4].backward);
  EXPECT_EQ(cs[4].what, "output gradient of the MLP");
  EXPECT_EQ(cs[4].overlaps->op, Op::MlpDown);
  EXPECT_EQ(cs[9].what, "input gradient of attention");
  EXPECT_EQ(cs[9].overlaps->pass, Pass::Wgrad);
}

TEST(Collectives, TensorParallelWithoutSequenceParallelAllReduces) {
  const Plan p = plan_of("llama-3-8b", 2);
  const std::vector<Collective> cs = plan_collectives(p, layout_for(p, 0, false, 1, CommType::Fp32));
  ASSERT_EQ(cs.size(), 4u);
  EXPECT_EQ(count(cs, CommGroup::Tensor, CollKind::AllReduce), 4);
  EXPECT_EQ(cs[0].size_bytes(CommType::Bf16), 128 * MiB);
  EXPECT_DOUBLE_EQ(cs[0].bus_factor(), 1.0);  // 2(n-1)/n at n = 2
}

// Llama 3 8B, DP 2 with the distributed optimizer: per layer 4096 x 6144 (QKV, GQA 32/8 x 128) +
// 4096 x 4096 + 4096 x 28672 + 14336 x 4096 = 218103808 weights; the LM head 4096 x 128256 once.
TEST(Collectives, Llama8bDataParallelZero1) {
  const Plan p = plan_of("llama-3-8b");
  const std::vector<Collective> cs = plan_collectives(p, layout_for(p, 2, true, 1, CommType::Fp32));
  ASSERT_EQ(cs.size(), 4u);  // AG weights + RS gradients, for the layers and for the LM head
  const Collective& rs = find(cs, CommGroup::Data, CollKind::ReduceScatter, "gradients of the layer");
  EXPECT_EQ(rs.rows * rs.width, 218103808);
  EXPECT_EQ(rs.size_bytes(rs.type_bf16), 218103808LL * 4);  // FP32 main gradients
  EXPECT_EQ(times_per_step(rs, p), 32);
  // The weights are gathered in BF16 in every recipe, as Megatron-Core and NeMo do by default.
  const Collective& ag = find(cs, CommGroup::Data, CollKind::AllGather, "updated layer");
  EXPECT_EQ(ag.size_bytes(ag.type_bf16), 218103808LL * 2);
  EXPECT_EQ(ag.type_fp8, CommType::Bf16);
  const Collective& head = find(cs, CommGroup::Data, CollKind::AllGather, "updated LM head");
  EXPECT_EQ(head.rows, 4096LL * 128256);
  EXPECT_EQ(head.type_fp8, CommType::Bf16);
  EXPECT_EQ(times_per_step(head, p), 1);
  // --fp8-param-gather: FP8 under the FP8 recipes, the LM head still BF16; the layout says so.
  CommLayout fp8_gather = layout_for(p, 2, true, 1, CommType::Fp32);
  fp8_gather.fp8_param_gather = true;
  const std::vector<Collective> f8 = plan_collectives(p, fp8_gather);
  const Collective& ag8 = find(f8, CommGroup::Data, CollKind::AllGather, "updated layer");
  EXPECT_EQ(ag8.type_fp8, CommType::Fp8);
  EXPECT_EQ(ag8.size_bytes(ag8.type_fp8), 218103808LL);
  EXPECT_EQ(find(f8, CommGroup::Data, CollKind::AllGather, "updated LM head").type_fp8, CommType::Bf16);
  const CommResult planned = plan_comm(p, fp8_gather);
  EXPECT_EQ(comm_to_json(planned, p)["layout"]["fp8_param_gather"], true);
  EXPECT_NE(render_comm_text(planned, p).find("FP8 weight gathers (--fp8-param-gather)"), std::string::npos);
  EXPECT_EQ(comm_to_json(plan_comm(p, layout_for(p, 2, true, 1, CommType::Fp32)), p)["layout"]["fp8_param_gather"], false);

  // BF16 gradients halve the reduction; ZeRO-3 gathers the weights in forward and backward.
  const std::vector<Collective> z3 = plan_collectives(p, layout_for(p, 2, true, 3, CommType::Bf16));
  EXPECT_EQ(z3.size(), 6u);
  EXPECT_EQ(count(z3, CommGroup::Data, CollKind::AllGather), 4);
  EXPECT_EQ(find(z3, CommGroup::Data, CollKind::ReduceScatter, "gradients of the layer").size_bytes(CommType::Bf16),
            218103808LL * 2);
  const std::vector<Collective> z0 = plan_collectives(p, layout_for(p, 2, true, 0, CommType::Fp32));
  EXPECT_EQ(z0.size(), 2u);
  EXPECT_EQ(count(z0, CommGroup::Data, CollKind::AllReduce), 2);
}

// Mixtral 8x7B, EP 8, balanced routing: 4096 tokens x top-2 on each of 8 ranks, one expert per
// rank: 8192 rows reach each rank, 1024 from each sender. Dispatch in BF16 moves 8192 x 4096 x 2
// bytes; in FP8 8192 x 4096 plus 8192 x 32 FP32 scales.
TEST(Collectives, MixtralExpertParallelBalanced) {
  const Plan p = plan_of("mixtral-8x7b", 1, "balanced");
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  EXPECT_EQ(l.expert_parallel, 8);
  EXPECT_EQ(l.data_parallel, 8);  // the smallest holding EP 8
  const std::vector<Collective> cs = plan_collectives(p, l);
  EXPECT_EQ(count(cs, CommGroup::Expert, CollKind::AllToAll), 4);
  EXPECT_EQ(count(cs, CommGroup::ExpertData, CollKind::ReduceScatter), 0);  // DP / EP = 1: experts not replicated
  const Collective& d = find(cs, CommGroup::Expert, CollKind::AllToAll, "dispatch");
  EXPECT_EQ(d.ranks, 8);
  ASSERT_EQ(d.matrix.size(), 64u);
  for (int64_t v : d.matrix) EXPECT_EQ(v, 1024);
  EXPECT_EQ(d.size_bytes(CommType::Bf16), 8192LL * 4096 * 2);
  EXPECT_EQ(d.size_bytes(CommType::Fp8), 8192LL * 4096 + 8192LL * 32 * 4);
  EXPECT_EQ(find(cs, CommGroup::Expert, CollKind::AllToAll, "combine").type_fp8, CommType::Bf16);
  EXPECT_EQ(times_per_step(d, p), 32);
  EXPECT_NEAR(d.bus_factor(), 7.0 / 8.0, 1e-12);
  // The attention weights (4096 x 6144 + 4096 x 4096) and the router (4096 x 8) over DP 8.
  EXPECT_EQ(find(cs, CommGroup::Data, CollKind::ReduceScatter, "gradients of the layer").rows, 41943040);
  const Collective& router = find(cs, CommGroup::Data, CollKind::ReduceScatter, "gradients of the router");
  EXPECT_EQ(router.rows, 32768);
  EXPECT_EQ(router.scope, Scope::MoeLayer);
}

// Uneven counts from a routing file: expert 0 (rank 0) gets 16384 rows, expert 7 none.
TEST(Collectives, MixtralUnevenAllToAllv) {
  const auto dir = gs::test::scratch_dir("collectives");
  const auto path = dir / "counts.json";
  std::ofstream(path) << "[16384, 8192, 8192, 8192, 8192, 8192, 8192, 0]";
  const Plan p = plan_of("mixtral-8x7b", 1, "file:" + path.string());
  const std::vector<Collective> cs = plan_collectives(p, layout_for(p, 0, true, 1, CommType::Fp32));
  const Collective& d = find(cs, CommGroup::Expert, CollKind::AllToAll, "dispatch");
  EXPECT_EQ(d.matrix[0], 2048);  // 16384 rows for rank 0, 2048 from each sender
  EXPECT_EQ(d.matrix[1], 1024);
  EXPECT_EQ(d.matrix[7], 0);
  EXPECT_EQ(d.rows_received(0), 16384);
  EXPECT_EQ(d.rows_received(7), 0);
  EXPECT_EQ(d.rows_sent(3), 2048 + 6 * 1024);
  EXPECT_EQ(d.size_bytes(CommType::Bf16), 16384LL * 4096 * 2);  // the busiest rank's receive
  const Collective& c = find(cs, CommGroup::Expert, CollKind::AllToAll, "combine");
  EXPECT_EQ(c.rows_sent(0), 16384);
  EXPECT_EQ(c.rows_sent(7), 0);
}

// EP 8 inside DP 16: the routed experts' gradients are reduced over DP / EP = 2 ranks; one expert
// per rank of 4096 x 28672 (gated up) + 14336 x 4096 weights.
TEST(Collectives, ExpertDataParallelGroup) {
  const Plan p = plan_of("mixtral-8x7b", 1, "balanced");
  const std::vector<Collective> cs = plan_collectives(p, layout_for(p, 16, true, 1, CommType::Fp32));
  const Collective& e = find(cs, CommGroup::ExpertData, CollKind::ReduceScatter, "gradients of the routed");
  EXPECT_EQ(e.ranks, 2);
  EXPECT_EQ(e.rows, 4096LL * 28672 + 14336LL * 4096);
  EXPECT_EQ(find(cs, CommGroup::Data, CollKind::ReduceScatter, "gradients of the layer").ranks, 16);
}

TEST(Collectives, BusBandwidthAsNcclTests) {
  const Plan p = plan_of("llama-3-8b", 2);
  const std::vector<Collective> cs = plan_collectives(p, layout_for(p, 0, true, 1, CommType::Fp32));
  // 128 MiB all-gather over 2 ranks in 1 ms: 134.2 GB/s algorithm bandwidth, half of it on the bus.
  EXPECT_NEAR(cs[0].bus_bandwidth_gbs(CommType::Bf16, 1.0), 67.108864, 1e-9);
  EXPECT_EQ(cs[0].bus_bandwidth_gbs(CommType::Bf16, 0.0), 0.0);
}

TEST(Collectives, OneGpuLayoutHasNone) {
  const Plan p = plan_of("llama-3-8b");
  EXPECT_TRUE(plan_collectives(p, layout_for(p, 0, true, 1, CommType::Fp32)).empty());
}

TEST(Collectives, BadLayoutsRefused) {
  const Plan p = plan_of("mixtral-8x7b", 1, "balanced");
  EXPECT_THROW(plan_collectives(p, layout_for(p, 12, true, 1, CommType::Fp32)), UsageError);  // 12 % 8
  EXPECT_THROW(plan_collectives(p, layout_for(p, 8, true, 4, CommType::Fp32)), UsageError);   // ZeRO 4
  EXPECT_THROW(comm_type_from_string("fp8"), UsageError);
  {  // 1024 experts over 1024 ranks: an all-to-all matrix past the bound
    ModelConfig big = find_preset("mixtral-8x7b").config;
    big.moe.num_experts = 1024;
    big.moe.expert_parallel = 1024;
    big.moe.routing = "balanced";
    big.num_hidden_layers = 1;
    const Plan bp = build_model_plan(big);
    EXPECT_THROW(plan_collectives(bp, layout_for(bp, 0, true, 1, CommType::Fp32)), UsageError);
  }
  EXPECT_EQ(comm_type_from_string(" BF16 "), CommType::Bf16);
  EXPECT_THROW(layout_for(build_shapes_plan("1024"), 0, true, 1, CommType::Fp32), UsageError);
  // 1 x 4095 tokens cannot be split over 2 ranks by sequence parallelism; without it they can.
  ModelConfig c = find_preset("llama-3-8b").config;
  c.tensor_parallel = 2;
  c.micro_batch_size = 1;
  c.sequence_length = 4095;
  const Plan odd = build_model_plan(c);
  try {
    plan_collectives(odd, layout_for(odd, 0, true, 1, CommType::Fp32));
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("not divisible"), std::string::npos) << e.what();
  }
  EXPECT_EQ(plan_collectives(odd, layout_for(odd, 0, false, 1, CommType::Fp32)).size(), 4u);
}

TEST(Collectives, MoreGpusThanPresentRefused) {
  const Plan p = plan_of("llama-3-8b", 4);
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  const std::vector<Collective> cs = plan_collectives(p, l);
  try {
    check_gpus_present(cs, l, 2);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("need 4 GPUs"), std::string::npos) << m;
    EXPECT_NE(m.find("this node has 2 visible GPUs"), std::string::npos) << m;
    EXPECT_NE(m.find("--tensor-parallel"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos);
  }
  EXPECT_NO_THROW(check_gpus_present(cs, l, 4));
  // Under MPI the count is of ranks, and more ranks is a way out.
  try {
    check_gpus_present(cs, l, 2, GpuPool::MpiRanks);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("this MPI job has 2 ranks, one GPU each"), std::string::npos) << m;
    EXPECT_NE(m.find("start more ranks"), std::string::npos) << m;
    EXPECT_EQ(m.find("visible GPU"), std::string::npos) << m;
  }
}

namespace {

// Time proportional to bytes: 100 GB/s of algorithm bandwidth.
class FakeComm : public CommEngine {
 public:
  explicit FakeComm(int64_t n) : n_(n) {}
  std::string description() const override { return "fake NCCL"; }
  int64_t gpus() const override { return n_; }
  CommTiming time(const Collective& c, CommType t, int, int iters) override {
    ++calls;
    const double ms = static_cast<double>(c.size_bytes(t)) / 1e8;
    return {ms, ms, ms, iters};
  }
  int calls = 0;

 private:
  int64_t n_;
};

}  // namespace

TEST(Collectives, MeasureEveryCollectiveInEachWireType) {
  const Plan p = plan_of("llama-3-8b", 2);
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  FakeComm eng(2);
  const CommResult r = measure_collectives(p, l, eng, 1, 5);
  // 10 collectives, the 6 all-gathers also in FP8.
  EXPECT_EQ(eng.calls, 16);
  ASSERT_EQ(r.measured.size(), 16u);
  const CommMeasurement* m = r.find(0, CommType::Fp8);
  ASSERT_NE(m, nullptr);
  EXPECT_NEAR(m->timing.ms, 64.0 * MiB / 1e8, 1e-9);
  EXPECT_EQ(r.find(1, CommType::Fp8), nullptr);  // reduce-scatter: BF16 only
  const std::string text = render_comm_text(r, p);
  EXPECT_NE(text.find("measured with fake NCCL"), std::string::npos) << text;
  EXPECT_NE(text.find("TP 2 (sequence parallel)"), std::string::npos) << text;
  // Per step: 32 layers x (10 x 128 MiB) in BF16 recipes, 32 x (4 x 128 + 6 x 64) in FP8.
  EXPECT_NE(text.find("per step: 40960.0 MiB in BF16 recipes, 28672.0 MiB in FP8 recipes"), std::string::npos) << text;
  FakeComm one(1);
  EXPECT_THROW(measure_collectives(p, l, one, 1, 5), UsageError);
  EXPECT_EQ(one.calls, 0);
  const std::string modelled = render_comm_text(plan_comm(p, l), p);
  EXPECT_NE(modelled.find("sizes modelled from the plan; nothing measured"), std::string::npos);
}

namespace {

class FakeOverlap : public FakeComm {
 public:
  FakeOverlap() : FakeComm(2) {}
  std::optional<OverlapTiming> overlap(const Collective& c, CommType t, const Gemm& g, OverlapGemm k, int,
                                       int) override {
    // Each family's GEMM beside that family's wire type.
    EXPECT_EQ(t, c.wire_type(k == OverlapGemm::Fp8));
    if (k == OverlapGemm::Fp8) {
      fp8_gemms.push_back(g);
      return OverlapTiming{1.0, 1.2, 1.1, 1.3};  // FP8: 0.3 ms exposed, the GEMM 20% slower
    }
    gemms.push_back(g);
    return OverlapTiming{2.0, 2.2, 1.5, 2.5};
  }
  std::vector<Gemm> gemms, fp8_gemms;
};

}  // namespace

// Each BF16 collective beside the GEMM it overlaps: the slowdown and the exposed time of the model.
TEST(Collectives, OverlapBesideItsGemm) {
  const Plan p = plan_of("llama-3-8b", 2);
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  FakeOverlap eng;
  const CommResult r = measure_collectives(p, l, eng, 1, 5);
  ASSERT_EQ(eng.gemms.size(), 10u);  // every TP/SP collective has its GEMM
  ASSERT_EQ(eng.fp8_gemms.size(), 10u);  // in both recipe families
  EXPECT_EQ(eng.gemms[0].op, Op::Qkv);
  EXPECT_EQ(eng.gemms[0].pass, Pass::Fprop);
  EXPECT_EQ(eng.gemms[0].m, 16384);
  const CommMeasurement* m = r.find(0, CommType::Bf16);
  ASSERT_TRUE(m && m->overlap);
  EXPECT_NEAR(m->overlap->gemm_slowdown(), 0.10, 1e-12);
  EXPECT_NEAR(m->overlap->exposed_ms(), 0.5, 1e-12);
  EXPECT_FALSE(m->overlap_fp8.has_value());  // the all-gather sends FP8 in FP8 recipes: another measurement
  const CommMeasurement* m8 = r.find(0, CommType::Fp8);
  ASSERT_TRUE(m8 && m8->overlap_fp8);
  EXPECT_FALSE(m8->overlap.has_value());
  EXPECT_NEAR(m8->overlap_fp8->exposed_ms(), 0.3, 1e-12);
  // A collective that sends BF16 in both families (the reduce-scatter after attention-out) holds
  // both figures in one measurement.
  size_t same = 0;
  while (same < r.collectives.size() && r.collectives[same].type_fp8 != r.collectives[same].type_bf16) ++same;
  ASSERT_LT(same, r.collectives.size());
  const CommMeasurement* rs = r.find(same, CommType::Bf16);
  ASSERT_TRUE(rs && rs->overlap && rs->overlap_fp8);
  const std::string text = render_comm_text(r, p);
  // 32 layers x 10 collectives x 0.5 ms exposed in BF16, 0.3 ms in FP8.
  EXPECT_NE(text.find("exposed per step: 160.00 ms in the BF16 recipe, 96.00 ms in FP8 recipes"), std::string::npos)
      << text;
  EXPECT_NE(text.find("10.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("20.0%"), std::string::npos) << text;
  // Per layer: 10 x 0.5 ms exposed, 10 x 0.3 in FP8.
  EXPECT_NE(text.find("exposed 5.000 ms in BF16, 3.000 ms in FP8"), std::string::npos) << text;
  const LayerComm lc = layer_comm(r, false);
  EXPECT_TRUE(lc.overlap_bf16 && lc.overlap_fp8);
  EXPECT_NEAR(lc.exposed_fp8_ms, 3.0, 1e-12);
  const nlohmann::json j = comm_to_json(r, p);
  EXPECT_DOUBLE_EQ(j["collectives"][0]["types"]["BF16"]["overlap"]["exposed_ms"].get<double>(), 0.5);
  EXPECT_EQ(j["collectives"][0]["types"]["BF16"]["overlap"]["gemm"], "BF16");
  EXPECT_DOUBLE_EQ(j["collectives"][0]["types"]["FP8"]["overlap_fp8"]["exposed_ms"].get<double>(), 0.3);
  EXPECT_FALSE(j["collectives"][0]["types"]["BF16"].contains("overlap_fp8"));
  EXPECT_EQ(j["collectives"][0]["overlaps"]["op"], "qkv");
  // In a result document: one item per collective and wire type, a record per measurement with its
  // times and overlap figures as named values, read back as any record is.
  RunResult run;
  run.plan = p;
  add_collective_records(run, r);
  const std::vector<std::string>& items = run.item_names.at(RecordKind::Collective);
  ASSERT_EQ(items.size(), r.measured.size());  // every item measured here
  EXPECT_EQ(run.records.size(), r.measured.size());
  EXPECT_NE(items[0].find("(BF16)"), std::string::npos) << items[0];
  EXPECT_NE(items[1].find("(FP8)"), std::string::npos) << items[1];  // the all-gather in FP8 recipes
  RecordKey k;
  k.kind = RecordKind::Collective;
  k.item = 0;
  k.pass = Pass::Fprop;
  const Record* rec = run.records.find(k);
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(rec->value.number("ms"), m->timing.ms);
  EXPECT_EQ(rec->value.number("size_bytes"), static_cast<double>(r.collectives[0].size_bytes(CommType::Bf16)));
  EXPECT_NEAR(*rec->value.number("overlap_bf16.exposed_ms"), 0.5, 1e-12);
  EXPECT_FALSE(rec->value.number("overlap_fp8.exposed_ms").has_value());
  const RunResult back = from_json(nlohmann::json::parse(to_json(run).dump()), "c.json");
  ASSERT_NE(back.records.find(k), nullptr);
  EXPECT_EQ(back.records.find(k)->value.number("bus_gbs"), rec->value.number("bus_gbs"));
  EXPECT_EQ(back.item_names.at(RecordKind::Collective), items);
  const nlohmann::json doc = comm_document(p, r);
  EXPECT_EQ(doc["comm"]["collectives"].size(), r.collectives.size());
  EXPECT_EQ(from_json(doc, "comm.json").records.size(), r.measured.size());
  // No overlap asked: none measured.
  FakeOverlap quiet;
  measure_collectives(p, l, quiet, 1, 5, false);
  EXPECT_TRUE(quiet.gemms.empty() && quiet.fp8_gemms.empty());
  // A GEMM less overlap (no SP all-reduce forward): exposed whole.
  OverlapTiming none;
  EXPECT_EQ(none.exposed_ms(), 0.0);
}

#ifdef GS_BINARY
TEST(Collectives, CliDryRunAndRefusals) {
  const auto dir = gs::test::scratch_dir("collectives_cli");
  gs::test::Out r = gs::test::run_gemmscope("--model llama-3-8b --tp 2 --comm --dry-run --bf16-only", dir);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Communication of the layout: TP 2 (sequence parallel), EP 1, DP 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sizes modelled from the plan; nothing measured"), std::string::npos) << r.out;
  // --comm-only without a GPU: the sizes, and why nothing was measured.
  const std::string json = (dir / "comm.json").string();
  r = gs::test::run_gemmscope("--model mixtral-8x7b --routing balanced --comm-only --zero-stage 3 --comm-json " + json,
                              dir);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("collectives not measured"), std::string::npos) << r.out;
  // --comm-json: a result document of the plan holding the collectives (the "comm" block, one item
  // per collective and wire type; no records: nothing measured).
  const nlohmann::json j = nlohmann::json::parse(gs::test::slurp(json));
  EXPECT_EQ(j["schema"], "gemmscope.result/3");
  EXPECT_NO_THROW(gs::from_json(j, "comm.json"));
  EXPECT_EQ(j["comm"]["layout"]["data_parallel"], 8);
  EXPECT_FALSE(j["comm"]["measured"].get<bool>());
  EXPECT_GE(j["items"]["collective"].size(), j["comm"]["collectives"].size());
  EXPECT_TRUE(j["records"].empty());
  bool dispatch = false;
  for (const auto& c : j["comm"]["collectives"])
    if (c["what"] == "dispatch of tokens to experts") {
      dispatch = true;
      EXPECT_EQ(c["types"]["FP8"]["size_bytes"], 8192LL * 4096 + 8192LL * 32 * 4);
      EXPECT_EQ(c["matrix"].size(), 64u);
    }
  EXPECT_TRUE(dispatch);
  // Layout flags without --comm, a shapes plan, bad values: one line, exit 2.
  for (const std::string& bad : {std::string("--model llama-3-8b --data-parallel 2 --dry-run"),
                                 std::string("--shapes 1024 --comm --dry-run"),
                                 std::string("--model llama-3-8b --comm --zero-stage 4 --dry-run"),
                                 std::string("--model llama-3-8b --comm --sequence-parallel maybe --dry-run"),
                                 std::string("--model mixtral-8x7b --comm --data-parallel 12 --dry-run")}) {
    r = gs::test::run_gemmscope(bad, dir);
    EXPECT_EQ(r.rc, 2) << bad << "\n" << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad << ": " << r.err;
  }
  r = gs::test::run_gemmscope("--model llama-3-8b --data-parallel 2 --dry-run", dir);
  EXPECT_NE(r.err.find("add --comm"), std::string::npos) << r.err;
  // --sequence-parallel written bare, as the flag it once was, before another flag: on, and --comm
  // is still --comm (it was taken for the flag's value); "off" after it still turns it off.
  for (const char* line : {"--model llama-3-8b --tensor-parallel 2 --sequence-parallel --comm --dry-run --bf16-only",
                           "--model llama-3-8b --tensor-parallel 2 --comm --dry-run --bf16-only --sequence-parallel"}) {
    r = gs::test::run_gemmscope(line, dir);
    EXPECT_EQ(r.rc, 0) << line << "\n" << r.err;
    EXPECT_NE(r.out.find("TP 2 (sequence parallel)"), std::string::npos) << line << "\n" << r.out;
  }
  r = gs::test::run_gemmscope("--model llama-3-8b --tensor-parallel 2 --sequence-parallel off --comm --dry-run --bf16-only", dir);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("TP 2 (no SP)"), std::string::npos) << r.out;
}
#endif

// A MoE model's per-layer line counts the layer's all-to-alls (scope MoeLayer) besides the per-layer
// collectives; a model whose layers all have experts prints no dense-layer line.
TEST(Collectives, PerMoeLayerLineHoldsTheAllToAlls) {
  const Plan p = plan_of("mixtral-8x7b", 1, "balanced", 2);
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  ASSERT_EQ(l.expert_parallel, 2);
  FakeComm eng(2);
  const CommResult r = measure_collectives(p, l, eng, 1, 5);
  double bf16 = 0, fp8 = 0;
  int a2a = 0;
  for (const Collective& c : r.collectives) {
    if (c.scope != Scope::Layer && c.scope != Scope::MoeLayer) continue;
    a2a += c.kind == CollKind::AllToAll;
    bf16 += static_cast<double>(c.size_bytes(c.type_bf16)) / 1e8;
    fp8 += static_cast<double>(c.size_bytes(c.type_fp8)) / 1e8;
  }
  EXPECT_EQ(a2a, 4);
  EXPECT_GT(bf16, fp8);  // the FP8 dispatch
  const std::string text = render_comm_text(r, p);
  EXPECT_NE(text.find(fmt::format("per MoE layer (measured): communication {:.3f} ms in BF16 recipes, {:.3f} ms in FP8 "
                                  "recipes",
                                  bf16, fp8)),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("per dense layer"), std::string::npos) << text;
}
