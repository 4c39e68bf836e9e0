// What a collective costs on a cluster (cluster.hpp), inside an NVLink domain and across domains,
// with the algorithms NCCL chooses between: ring (every collective), NVLink SHARP (all-reduce inside
// an NVSwitch domain), the hierarchical tree (all-reduce across domains: reduce inside each domain,
// a tree over the domains' NICs, broadcast back; NCCL's Tree / NVLSTree), and direct sends for
// all-to-all and point-to-point. Each algorithm's time is latency + bytes over its bottleneck
// bandwidth; an all-reduce takes the faster algorithm, as NCCL's tuner does. Sizes follow
// nccl-tests (collectives.hpp): all-gather the gathered output, reduce-scatter its input,
// all-reduce the buffer, all-to-all what one rank sends.
//
// Where the collectives of this node were measured (--comm), their times calibrate the model for
// the group sizes measured: docs/parallel.md.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "core/node/collectives.hpp"
#include "core/parallel/cluster.hpp"

namespace gs {

enum class CollAlgo { Ring, Nvls, Tree, Direct };
const char* to_string(CollAlgo a);  // "ring", "NVLS", "tree", "direct"

// Where a communicator's ranks sit: `ranks` in all, `per_domain` of them in each NVLink domain.
struct GroupPlacement {
  int64_t ranks = 1;
  int64_t per_domain = 1;
  int64_t domains() const { return per_domain > 0 ? (ranks + per_domain - 1) / per_domain : 1; }
};
// A group of `ranks` ranks `stride` apart in the global rank order (Megatron: TP innermost, then
// CP, DP, PP): as many of them in one domain as fit.
GroupPlacement place_group(int64_t ranks, int64_t stride, int64_t domain_gpus);

struct CollectiveCost {
  double ms = 0;
  CollAlgo algo = CollAlgo::Ring;
  bool calibrated = false;  // scaled by this node's measured collectives
  // nccl-tests bus bandwidth of this cost (GB/s).
  double bus_gbs(CollKind k, double bytes, int64_t ranks) const;
};

class CollectiveModel {
 public:
  explicit CollectiveModel(ClusterSpec c);
  const ClusterSpec& cluster() const { return c_; }
  // One collective of `bytes` (nccl-tests size) over `g`. A group of one rank costs nothing.
  CollectiveCost cost(CollKind kind, double bytes, GroupPlacement g) const;
  // A point-to-point send of `bytes` between two ranks, in one domain or across domains.
  CollectiveCost p2p(double bytes, bool same_domain) const;

  // Calibration from collectives measured on this node (one domain): per collective kind and group
  // size, the median of measured / modelled time over the measured collectives of 1 MiB or more
  // scales that kind's in-domain costs for that group size. Returns how many collectives were used.
  int calibrate(const CommResult& measured, const std::string& engine);
  std::string calibration_note() const { return note_; }

 private:
  double scale(CollKind k, int64_t ranks) const;
  ClusterSpec c_;
  std::map<std::pair<int, int64_t>, double> scale_;  // (kind, ranks) -> measured / modelled
  std::string note_;
};

}  // namespace gs
