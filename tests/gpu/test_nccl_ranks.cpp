// The NCCL engine with one rank per process (cuda/comm/nccl_comm.hpp, make_nccl_engine(ProcessGroup&)), as
// under MPI, without MPI: two threads of this process stand in for two ranks, each with its own GPU,
// through a ProcessGroup over shared memory. The communicators are then bootstrapped the MPI way
// (rank 0's unique id broadcast, ncclCommInitRank) and each iteration's time is the slower rank's.
#include <algorithm>
#include <barrier>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "core/node/collectives.hpp"
#include "core/model/model_config.hpp"
#include "core/node/process_group.hpp"
#include "cuda/common/device_count.hpp"
#include "cuda/comm/nccl_comm.hpp"
#include "gpu_test_util.hpp"

using namespace gs;

namespace {

struct Shared {
  explicit Shared(int n) : ranks(n), bar(n), bytes(), values(n), strings(n) {}
  int ranks;
  std::barrier<> bar;
  std::vector<unsigned char> bytes;
  std::vector<std::vector<double>> values;
  std::vector<std::string> strings;
};

class ThreadRank : public ProcessGroup {
 public:
  ThreadRank(Shared& s, int rank) : s_(s), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_.ranks; }
  int local_rank() const override { return rank_; }
  std::string host() const override { return "this host"; }
  std::string library() const override { return "threads"; }
  void broadcast(void* data, size_t bytes, int root) override {
    if (rank_ == root) s_.bytes.assign(static_cast<unsigned char*>(data), static_cast<unsigned char*>(data) + bytes);
    s_.bar.arrive_and_wait();
    if (rank_ != root) std::memcpy(data, s_.bytes.data(), bytes);
    s_.bar.arrive_and_wait();
  }
  std::vector<std::string> gather(const std::string& mine, int root) override {
    s_.strings[rank_] = mine;
    s_.bar.arrive_and_wait();
    std::vector<std::string> all;
    if (rank_ == root) all = s_.strings;
    s_.bar.arrive_and_wait();
    return all;
  }
  void max_in_place(std::vector<double>& v) override {
    s_.values[rank_] = v;
    s_.bar.arrive_and_wait();
    for (const auto& other : s_.values)
      for (size_t i = 0; i < v.size() && i < other.size(); ++i) v[i] = std::max(v[i], other[i]);
    s_.bar.arrive_and_wait();
  }
  void barrier() override { s_.bar.arrive_and_wait(); }

 private:
  Shared& s_;
  int rank_;
};

// Runs `body(rank, engine)` on two threads, one rank each; the results of both.
template <class R>
std::vector<R> on_two_ranks(const std::function<R(int, CommEngine&)>& body, std::string& why) {
  Shared shared(2);
  std::vector<R> out(2);
  std::vector<std::string> whys(2);
  std::vector<std::exception_ptr> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        ThreadRank pg(shared, r);
        std::unique_ptr<CommEngine> e = cuda::make_nccl_engine(pg, whys[r]);
        if (e) out[r] = body(r, *e);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  why = whys[0];
  return out;
}

// Skips where NCCL is genuinely absent: a build without nccl.h (said); where the hardware is:
// fewer than two GPUs; and without libnccl.so.2 here (said; a failure under GS_EXPECT_GPU=1).
#define GS_REQUIRE_NCCL_ON_TWO_GPUS()                                                              \
  GS_REQUIRE_GPU();                                                                                \
  if (!cuda::nccl_built()) GTEST_SKIP() << "not built: " << cuda::nccl_unavailable_reason();      \
  if (std::string gs_gpus_why_; !two_gpus(gs_gpus_why_)) GTEST_SKIP() << "needs 2 GPUs: " << gs_gpus_why_; \
  GS_REQUIRE_RUNTIME(cuda::nccl_unavailable_reason())

bool two_gpus(std::string& why) {
  const int n = cuda::visible_device_count(why);
  if (n >= 2) return true;
  if (why.empty()) why = std::to_string(n) + " GPU visible";
  return false;
}

}  // namespace

TEST(NcclRanks, TensorParallelOneRankPerThread) {
  GS_REQUIRE_NCCL_ON_TWO_GPUS();
  std::string why;
  ModelConfig c = find_preset("llama-3-8b").config;
  c.tensor_parallel = 2;
  c.micro_batch_size = 1;
  const Plan p = build_model_plan(c);
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  const std::vector<CommResult> rs = on_two_ranks<CommResult>(
      [&](int, CommEngine& e) {
        EXPECT_EQ(e.gpus(), 2);
        return measure_collectives(p, l, e, 3, 10);
      },
      why);
  ASSERT_FALSE(rs[0].measured.empty()) << "NCCL is there, yet the ranks measured nothing: " << why;
  ASSERT_EQ(rs[0].measured.size(), rs[1].measured.size());
  for (size_t i = 0; i < rs[0].measured.size(); ++i) {
    const CommMeasurement& a = rs[0].measured[i];
    const CommMeasurement& b = rs[1].measured[i];
    const Collective& x = rs[0].collectives[a.index];
    SCOPED_TRACE(x.what);
    EXPECT_EQ(a.timing.ms, b.timing.ms);  // both ranks hold the slower rank's times
    EXPECT_GT(a.timing.ms, 0.0);
    const double bw = x.bus_bandwidth_gbs(a.type, a.timing.ms);
    EXPECT_GT(bw, 10.0);
    EXPECT_LT(bw, 2000.0);
    if (a.type == CommType::Bf16) {
      ASSERT_TRUE(a.overlap.has_value());
      EXPECT_EQ(a.overlap->both_ms, b.overlap->both_ms);
      EXPECT_GE(a.overlap->both_ms, a.overlap->gemm_overlap_ms * 0.999);
    }
  }
  // Against the one-process engine over the same GPUs: the same collective within a factor of 2.
  std::string why1;
  std::unique_ptr<CommEngine> one = cuda::make_nccl_engine(why1);
  ASSERT_NE(one, nullptr) << why1;
  const CommTiming t1 = one->time(rs[0].collectives[0], CommType::Bf16, 3, 10);
  const CommMeasurement* t2 = rs[0].find(0, CommType::Bf16);
  ASSERT_NE(t2, nullptr);
  EXPECT_LT(t2->timing.ms, 2 * t1.ms);
  EXPECT_GT(t2->timing.ms, 0.5 * t1.ms);
  std::cout << render_comm_text(rs[0], p);
}

TEST(NcclRanks, ExpertAllToAllvOneRankPerThread) {
  GS_REQUIRE_NCCL_ON_TWO_GPUS();
  std::string why;
  ModelConfig c = find_preset("mixtral-8x7b").config;
  c.moe.expert_parallel = 2;
  c.moe.routing = "hot:0.6";
  c.num_hidden_layers = 2;
  const Plan p = build_model_plan(c);
  const CommLayout l = layout_for(p, 0, true, 3, CommType::Bf16);
  const std::vector<CommResult> rs =
      on_two_ranks<CommResult>([&](int, CommEngine& e) { return measure_collectives(p, l, e, 2, 5, false); }, why);
  ASSERT_FALSE(rs[0].measured.empty()) << "NCCL is there, yet the ranks measured nothing: " << why;
  int a2a = 0;
  for (const CommMeasurement& m : rs[0].measured) {
    const Collective& x = rs[0].collectives[m.index];
    SCOPED_TRACE(x.what);
    EXPECT_GT(m.timing.ms, 0.0);
    a2a += x.kind == CollKind::AllToAll;
  }
  EXPECT_EQ(a2a, 5);  // dispatch in BF16 and FP8, combine, the two backward
}
