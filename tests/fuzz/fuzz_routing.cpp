// libFuzzer harness: bytes of a routing file (--routing file:PATH) -> read_routing_file (the
// input-file policy and the counts' checks) -> route() with sizes the counts could fit (so the
// sum and per-expert checks run, not only the size check) -> check_routing on the result, and
// the routing report of a plan built with it.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/plan/routing.hpp"
#include "fuzz_common.hpp"

namespace {

const std::string& routing_path() {
  static const std::string p = [] {
    char tmpl[] = "/tmp/gemmscope-fuzz-routing-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd < 0) std::abort();
    ::close(fd);
    std::atexit([] { std::remove(routing_path().c_str()); });
    return std::string(tmpl);
  }();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = routing_path();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  std::vector<int64_t> counts;
  gs::fuzz::expect_documented_outcome([&] { counts = gs::read_routing_file(path); });
  if (counts.empty()) return 0;
  // Sizes the counts may fit: each top-k from 1 to 3, tokens = the sum / top-k (when it
  // divides), one or two EP ranks; and sizes they do not fit (the error paths).
  int64_t sum = 0;
  bool overflow = false;
  for (int64_t c : counts) overflow = overflow || __builtin_add_overflow(sum, c, &sum);
  const int64_t experts = static_cast<int64_t>(counts.size());
  for (int64_t top_k = 1; top_k <= 3 && top_k <= experts; ++top_k)
    for (int64_t ep : {int64_t{1}, int64_t{2}}) {
      const int64_t tokens = overflow ? 1 : std::max<int64_t>(1, sum / top_k / ep);
      for (double capacity : {0.0, 1.0}) {
        gs::fuzz::expect_documented_outcome([&] {
          gs::RoutingSpec spec;
          spec.kind = gs::RoutingKind::File;
          spec.path = path;
          const gs::Routing r = gs::route(spec, experts, top_k, tokens, ep, 1, capacity);
          gs::check_routing(r, "fuzz routing");
          (void)r.max_over_mean();
          (void)r.busiest_over_mean_rank();
          (void)r.busiest_counts();
        });
      }
    }
  return 0;
}
