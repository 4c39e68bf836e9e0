#include "core/parallel/collective_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gs {

const char* to_string(CollAlgo a) {
  switch (a) {
    case CollAlgo::Ring: return "ring";
    case CollAlgo::Nvls: return "NVLS";
    case CollAlgo::Tree: return "tree";
    case CollAlgo::Direct: return "direct";
  }
  return "?";
}

GroupPlacement place_group(int64_t ranks, int64_t stride, int64_t domain_gpus) {
  GroupPlacement g;
  g.ranks = std::max<int64_t>(1, ranks);
  const int64_t fit = stride >= domain_gpus ? 1 : std::max<int64_t>(1, domain_gpus / std::max<int64_t>(1, stride));
  g.per_domain = std::min(g.ranks, fit);
  return g;
}

double CollectiveCost::bus_gbs(CollKind k, double bytes, int64_t ranks) const {
  if (ms <= 0 || ranks < 2) return 0;
  const double n = static_cast<double>(ranks);
  const double factor = k == CollKind::AllReduce ? 2 * (n - 1) / n : (n - 1) / n;
  return bytes / (ms * 1e-3) * factor / 1e9;
}

CollectiveModel::CollectiveModel(ClusterSpec c) : c_(std::move(c)) {}

double CollectiveModel::scale(CollKind k, int64_t ranks) const {
  const auto it = scale_.find({static_cast<int>(k), ranks});
  return it == scale_.end() ? 1.0 : it->second;
}

namespace {

double gbs_to_bytes_per_ms(double gbs) { return gbs * 1e6; }

}  // namespace

CollectiveCost CollectiveModel::cost(CollKind kind, double bytes, GroupPlacement g) const {
  CollectiveCost out;
  const int64_t n = g.ranks;
  if (n < 2 || bytes <= 0) return out;
  const int64_t k = std::min(g.per_domain, n), m = g.domains();
  const double N = static_cast<double>(n), K = static_cast<double>(k), M = static_cast<double>(m);
  const double nv = gbs_to_bytes_per_ms(c_.nvlink_gbs.value * c_.nvlink_efficiency.value);
  const double net = gbs_to_bytes_per_ms(c_.scaleout_gbs.value * c_.scaleout_efficiency.value);
  const double base = c_.base_us.value * 1e-3, nv_step = c_.nvlink_step_us.value * 1e-3, net_step = c_.net_step_us.value * 1e-3;
  // Ring steps: all-reduce 2(n-1), the others n-1; of them, the ones that cross domains.
  const bool ar = kind == CollKind::AllReduce;
  const double steps = ar ? 2 * (N - 1) : N - 1;
  const double inter_steps = m > 1 ? (ar ? 2 * (M - 1) : M - 1) : 0;
  const double ring_latency = base + (steps - inter_steps) * nv_step + inter_steps * net_step;
  // The ring's bandwidth: NVLink inside one domain; across domains the slower of NVLink and the
  // group's NICs in a domain (one per GPU, rail-aligned), or one NIC when one rank per domain.
  const double ring_bw = m == 1 ? nv : (k == 1 ? net : std::min(nv, K * net));
  const double ring_factor = ar ? 2 * (N - 1) / N : (N - 1) / N;

  if (kind == CollKind::AllToAll) {
    // Direct sends to every peer: the other domains' share leaves through this GPU's NIC, the own
    // domain's over NVLink, concurrently.
    const double t_nv = bytes * (K - 1) / N / nv, t_net = m > 1 ? bytes * (N - K) / N / net : 0;
    out.ms = base + (m > 1 ? net_step : nv_step) + std::max(t_nv, t_net);
    out.algo = CollAlgo::Direct;
  } else {
    out.ms = ring_latency + bytes * ring_factor / ring_bw;
    out.algo = CollAlgo::Ring;
    if (ar) {
      const bool nvls = c_.nvls_efficiency.has_value() && k > 1;
      const double nvls_bw = nvls ? gbs_to_bytes_per_ms(c_.nvlink_gbs.value * c_.nvls_efficiency->value) : 0;
      const double nvls_base = nvls ? c_.nvls_base_us->value * 1e-3 : 0;
      if (m == 1 && nvls) {
        const double t = nvls_base + bytes / nvls_bw;
        if (t < out.ms) out = {t, CollAlgo::Nvls};
      }
      if (m > 1) {
        // Reduce inside each domain (NVLS where the switches reduce, else a ring's reduce-scatter
        // and all-gather), an all-reduce of each rank's 1/k share across the domains over its NIC,
        // pipelined with the in-domain part.
        const double t_intra = k == 1 ? 0 : nvls ? bytes / nvls_bw : 2 * (K - 1) / K * bytes / nv;
        const double t_inter = 2 * (M - 1) / M * (bytes / K) / (net * c_.tree_efficiency.value);
        const double lat = (nvls ? nvls_base : base + 2 * (K - 1) * nv_step) + 2 * std::ceil(std::log2(M)) * net_step;
        const double t = lat + std::max(t_intra, t_inter);
        if (t < out.ms) out = {t, CollAlgo::Tree};
      }
    }
  }
  if (m == 1) {
    const double s = scale(kind, n);
    if (s != 1.0) {
      out.ms *= s;
      out.calibrated = true;
    }
  }
  return out;
}

CollectiveCost CollectiveModel::p2p(double bytes, bool same_domain) const {
  CollectiveCost out;
  if (bytes <= 0) return out;
  out.algo = CollAlgo::Direct;
  if (same_domain) {
    out.ms = (c_.base_us.value + c_.nvlink_step_us.value) * 1e-3 +
             bytes / gbs_to_bytes_per_ms(c_.nvlink_gbs.value * c_.nvlink_efficiency.value);
  } else {
    out.ms = (c_.base_us.value + c_.net_step_us.value) * 1e-3 +
             bytes / gbs_to_bytes_per_ms(c_.scaleout_gbs.value * c_.scaleout_efficiency.value);
  }
  return out;
}

int CollectiveModel::calibrate(const CommResult& measured, const std::string& engine) {
  std::map<std::pair<int, int64_t>, std::vector<double>> ratios;
  for (const CommMeasurement& m : measured.measured) {
    if (m.index >= measured.collectives.size() || m.timing.ms <= 0) continue;
    const Collective& c = measured.collectives[m.index];
    const double bytes = static_cast<double>(c.size_bytes(m.type));
    if (bytes < double(1 << 20) || c.ranks < 2) continue;
    GroupPlacement g;
    g.ranks = g.per_domain = c.ranks;  // measured on this node: one domain
    const CollectiveCost model = cost(c.kind, bytes, g);
    if (model.ms > 0) ratios[{static_cast<int>(c.kind), c.ranks}].push_back(m.timing.ms / model.ms);
  }
  int used = 0;
  std::string parts;
  for (auto& [key, r] : ratios) {
    std::sort(r.begin(), r.end());
    const double med = r.size() % 2 ? r[r.size() / 2] : 0.5 * (r[r.size() / 2 - 1] + r[r.size() / 2]);
    scale_[key] = med;
    used += static_cast<int>(r.size());
    parts += fmt::format("{}{} over {} GPUs x{:.2f}", parts.empty() ? "" : ", ", to_string(static_cast<CollKind>(key.first)),
                         key.second, med);
  }
  if (used > 0)
    note_ = fmt::format("collective times calibrated on {} collectives measured on this node ({}): measured / modelled "
                        "{}; other group sizes and cross-node collectives are modelled",
                        used, engine.empty() ? "NCCL" : engine, parts);
  return used;
}

}  // namespace gs
