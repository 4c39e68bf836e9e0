// A cluster as the parallel step sees it: GPUs per node, the NVLink domain (8 on HGX/DGX, 72 on
// GB200 NVL72), each GPU's NVLink and scale-out bandwidth and the links' latencies, whether the
// NVSwitches reduce (NVLink SHARP), and the fractions of line rate NCCL reaches on each link. Every
// number carries its source (data/clusters.json, embedded in the binary); a user's own file in the
// same schema is read through core/io/input_file.hpp with every value bounded.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/gpu/gpu_spec.hpp"

namespace gs {

struct ClusterSpec {
  std::string key;   // "dgx-h100"
  std::string name;  // "NVIDIA DGX H100 (8 x H100 SXM, NVSwitch, 8 x 400 Gb/s InfiniBand)"
  std::string gpu;   // the GPU spec database key of its GPUs ("H100")
  Sourced gpus_per_node, nvlink_domain;
  Sourced nvlink_gbs;          // per GPU, one direction (GB/s = 1e9 B/s)
  Sourced scaleout_gbs;        // per GPU, one direction: the node's NICs over its GPUs
  Sourced nvlink_step_us;      // one ring step over NVLink (NCCL's Simple protocol)
  Sourced net_step_us;         // one ring step over the network
  Sourced base_us;             // a collective's fixed cost (launch, handshake)
  Sourced nvlink_efficiency;   // fraction of nvlink_gbs a ring reaches (protocol overhead)
  Sourced scaleout_efficiency; // fraction of scaleout_gbs a ring reaches per NIC
  std::optional<Sourced> nvls_efficiency;  // NVLink SHARP all-reduce: algorithm bandwidth / nvlink_gbs; none: no NVLS
  std::optional<Sourced> nvls_base_us;     // its fixed cost (with NVLS)
  Sourced tree_efficiency;     // NCCL's tree / NVLS-tree across nodes: fraction of the network part's rate
  std::vector<std::string> notes;
  std::string origin;  // "preset" or the file it was read from
  int64_t node_gpus() const { return static_cast<int64_t>(gpus_per_node.value); }
  int64_t domain_gpus() const { return static_cast<int64_t>(nvlink_domain.value); }
};

struct ClusterDb {
  std::vector<ClusterSpec> clusters;
  std::string origin;
  // By key, any case ('_' and ' ' as '-'); UsageError "unknown cluster 'x' (known: ...)" otherwise.
  const ClusterSpec& find(const std::string& key) const;
  std::string known_keys() const;
};

// Parses a cluster document (schema "gemmscope.clusters/1"). UsageError naming `where`, the entry and
// the field for anything outside the schema or a number outside its bounds (gpus_per_node 1..1024,
// nvlink_domain 1..4096 and at least gpus_per_node, bandwidths up to 100000 GB/s, latencies up to
// 10000 us, efficiencies in (0, 1]).
ClusterDb parse_cluster_db(const nlohmann::json& doc, const std::string& where);
// The presets shipped in the binary (data/clusters.json).
const ClusterDb& cluster_presets();
// --cluster NAME|FILE: a preset's key, else a JSON file in the same schema (read through
// read_json_file): its first cluster. UsageError when it is neither.
ClusterSpec resolve_cluster(const std::string& name_or_file);

}  // namespace gs
