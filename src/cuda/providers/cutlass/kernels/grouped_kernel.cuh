// The one template behind every CUTLASS grouped family (cutlass_grouped.hpp): a ptr-array
// grouped GEMM, BF16 or FP8 operands, FP32 accumulation, TMA warp-specialized cooperative kernel.
// Each family's .cu instantiates it once, so the families compile in parallel. The architecture:
// cutlass_arch.cuh (ArchTag, the policy's kernel target).
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "core/util/error.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/providers/cutlass/cutlass_grouped.hpp"
#include "cuda/providers/cutlass/kernels/cutlass_arch.cuh"
#include "cuda/common/device_buffer.hpp"

namespace gs::cuda::cutlass_kernels {

using namespace cute;

// One ptr-array grouped GEMM: A[m,k] (LayoutA) x B (LayoutB) -> D[m,n] row-major, FP32
// accumulation, TMA warp-specialized, schedule `Schedule` (cooperative; the FP8 fast-accumulation
// variant where the recipe accumulates fast), tile `Tile`, cluster 1x1: a 1x1 cluster needs no
// multicast partner in a group whose rows end mid-cluster. The epilogue is alpha * acc + beta * C,
// alpha from a per-group device array when the launch is given one (FP8: the product of the two
// operands' per-tensor scales), else 1.
template <class ElementA_, class ElementB_, class LayoutA, class LayoutB, class OutT, class Schedule, class Tile_>
struct GroupedKernel {
  using ElementD = OutT;
  using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
  using ElementA = ElementA_;
  using ElementB = ElementB_;
  using ElementC = ElementD;
  using LayoutC = cutlass::layout::RowMajor;
  using Acc = float;
  static constexpr int kAlignA = 128 / cutlass::sizeof_bits<ElementA>::value;
  static constexpr int kAlignB = 128 / cutlass::sizeof_bits<ElementB>::value;
  static constexpr int kAlignC = 128 / cutlass::sizeof_bits<ElementC>::value;
  using Tile = Tile_;
  using Cluster = Shape<_1, _1, _1>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      ArchTag, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, Acc, Acc, ElementC, LayoutC*, kAlignC, ElementD, LayoutC*,
      kAlignC, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
      cutlass::epilogue::fusion::LinearCombination<ElementD, Acc, ElementC, Acc>>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      ArchTag, cutlass::arch::OpClassTensorOp, ElementA, LayoutA*, kAlignA, ElementB, LayoutB*, kAlignB,
      Acc, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      Schedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideC = typename Kernel::InternalStrideC;
  using StrideD = typename Kernel::InternalStrideD;
  static std::string tile() {
    return fmt::format("{}x{}x{} cluster 1x1 cooperative{}", int(size<0>(Tile{})), int(size<1>(Tile{})),
                       int(size<2>(Tile{})),
                       std::is_same_v<Schedule, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum>
                           ? " fast-accum" : "");
  }
};

// The N extent of a family's tile: 128 (every family) or 256 (the wide variant of the default-recipe
// BF16 and FP8 per-tensor families, cutlass_grouped.hpp CutlassTile).
template <int kTileN, int kTileK>
using TileOf = Shape<_128, Int<kTileN>, Int<kTileK>>;

// BF16: tile 128x128x64 (small experts leave a 256-row tile mostly empty), or 128x256x64.
template <class LayoutA, class LayoutB, class OutT, int kTileN = 128>
using GroupedBf16 = GroupedKernel<cutlass::bfloat16_t, cutlass::bfloat16_t, LayoutA, LayoutB, OutT,
                                  cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative, TileOf<kTileN, 64>>;

// FP8 per-tensor: both operands K-major (A[m,k], B stored [n,k]: the only FP8 layout wgmma reads),
// tile 128x128x128 (128 bytes of K per stage, as CUTLASS's FP8 examples).
template <class ElementA, class ElementB, class OutT, bool kFastAccum, int kTileN = 128>
using GroupedFp8 = GroupedKernel<
    ElementA, ElementB, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor, OutT,
    std::conditional_t<kFastAccum, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum,
                       cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>,
    TileOf<kTileN, 128>>;

// FP8 block scaling (CUTLASS's blockwise ptr-array kernel, as its example 68): E4M3 x E4M3, FP32 scales
// applied in the mainloop per 128 elements of K (promotion to FP32 every 128), A with 1x128 scales,
// B with 1x128 (kScaleN = 1: Wgrad's gradient) or 128x128 (kScaleN = 128: a weight) scales. Scales
// M/N-major as CUTLASS lays them out: A's [ceil(K/128), m] (the quantizer's 1x128 layout), B's
// [ceil(K/128), n] for 1x128, [ceil(N/128), ceil(K/128)] K-major for 128x128 (the quantizer pads
// its rows to a multiple of 4 blocks: the caller compacts them when that differs). Tile 128x128x128.
template <int kScaleN, class OutT, int kTileN = 128>
struct GroupedFp8Block {
  static constexpr bool kBlockwise = true;
  using ElementD = OutT;
  using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
  using ElementA = cutlass::float_e4m3_t;
  using ElementB = cutlass::float_e4m3_t;
  using ElementC = ElementD;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutC = cutlass::layout::RowMajor;
  using Acc = float;
  using ScaleConfig = BlockwiseScaleConfig<1, kScaleN, 128, cute::GMMA::Major::MN,
                                            kScaleN == 1 ? cute::GMMA::Major::MN : cute::GMMA::Major::K>;
  using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
  using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());
  static constexpr int kAlignA = 16, kAlignB = 16;
  static constexpr int kAlignC = 128 / cutlass::sizeof_bits<ElementC>::value;
  using Tile = TileOf<kTileN, 128>;
  using Cluster = Shape<_1, _1, _1>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      ArchTag, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, Acc, Acc, ElementC, LayoutC*, kAlignC, ElementD, LayoutC*,
      kAlignC, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
      cutlass::epilogue::fusion::LinearCombination<ElementD, Acc, ElementC, Acc>>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      ArchTag, cutlass::arch::OpClassTensorOp, ElementA, cute::tuple<LayoutA*, LayoutSFA*>, kAlignA,
      ElementB, cute::tuple<LayoutB*, LayoutSFB*>, kAlignB, Acc, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideC = typename Kernel::InternalStrideC;
  using StrideD = typename Kernel::InternalStrideD;
  static std::string tile() {
    return fmt::format("128x{}x128 cluster 1x1 cooperative blockwise 1x128 x {}", kTileN, kScaleN == 1 ? "1x128" : "128x128");
  }
};

template <class K, class = void>
struct IsBlockwise : std::false_type {};
template <class K>
struct IsBlockwise<K, std::void_t<decltype(K::kBlockwise)>> : std::true_type {};

template <class T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  if (!v.empty()) GS_CUDA(cudaMemcpy(b.get(), v.data(), b.bytes(), cudaMemcpyHostToDevice));
  return b;
}

template <class K>
class Launch final : public CutlassGroupedLaunch {
 public:
  // alpha: null (alpha = 1), or a device array of one FP32 alpha per group, read at every launch.
  Launch(CutlassGroupedFamily f, const std::vector<CutlassGroup>& groups, int device, float beta,
         const float* alpha = nullptr)
      : family_(f) {
    if (groups.empty()) throw std::invalid_argument("CUTLASS grouped GEMM with no non-empty group");
    using UnderlyingShape = typename K::ProblemShape::UnderlyingProblemShape;
    std::vector<UnderlyingShape> shapes;
    std::vector<const typename K::ElementA*> pa;
    std::vector<const typename K::ElementB*> pb;
    std::vector<const typename K::ElementC*> pc;
    std::vector<typename K::ElementD*> pd;
    std::vector<typename K::StrideA> sa;
    std::vector<typename K::StrideB> sb;
    std::vector<typename K::StrideC> sc;
    std::vector<typename K::StrideD> sd;
    for (const CutlassGroup& g : groups) {
      if (g.m <= 0 || g.n <= 0 || g.k <= 0) throw std::invalid_argument("CUTLASS grouped GEMM: an empty group");
      shapes.push_back({g.m, g.n, g.k});
      pa.push_back(static_cast<const typename K::ElementA*>(g.a));
      pb.push_back(static_cast<const typename K::ElementB*>(g.b));
      pc.push_back(static_cast<const typename K::ElementC*>(g.d));
      pd.push_back(static_cast<typename K::ElementD*>(g.d));
      // Packed operands: the leading dimension is the contiguous extent of each layout.
      sa.push_back(cutlass::make_cute_packed_stride(typename K::StrideA{}, {g.m, g.k, 1}));
      sb.push_back(cutlass::make_cute_packed_stride(typename K::StrideB{}, {g.n, g.k, 1}));
      sc.push_back(cutlass::make_cute_packed_stride(typename K::StrideC{}, {g.m, g.n, 1}));
      sd.push_back(cutlass::make_cute_packed_stride(typename K::StrideD{}, {g.m, g.n, 1}));
    }
    host_shapes_ = shapes;
    shapes_ = upload(shapes);
    pa_ = upload(pa); pb_ = upload(pb); pc_ = upload(pc); pd_ = upload(pd);
    sa_ = upload(sa); sb_ = upload(sb); sc_ = upload(sc); sd_ = upload(sd);

    cutlass::KernelHardwareInfo hw;
    hw.device_id = device;
    hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);
    typename K::Gemm::Arguments args;
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {static_cast<int>(groups.size()), shapes_.get<UnderlyingShape>(), host_shapes_.data()};
    if constexpr (IsBlockwise<K>::value) {
      std::vector<const float*> sfa, sfb;
      std::vector<typename K::LayoutSFA> lsfa;
      std::vector<typename K::LayoutSFB> lsfb;
      for (const CutlassGroup& g : groups) {
        if (!g.sfa || !g.sfb) throw std::invalid_argument("CUTLASS blockwise GEMM: a group without its block scales");
        sfa.push_back(g.sfa);
        sfb.push_back(g.sfb);
        lsfa.push_back(K::ScaleConfig::tile_atom_to_shape_SFA(make_shape(g.m, g.n, g.k, 1)));
        lsfb.push_back(K::ScaleConfig::tile_atom_to_shape_SFB(make_shape(g.m, g.n, g.k, 1)));
      }
      psfa_ = upload(sfa); psfb_ = upload(sfb); lsfa_ = upload(lsfa); lsfb_ = upload(lsfb);
      args.mainloop = {pa_.get<const typename K::ElementA*>(), sa_.get<typename K::StrideA>(),
                       pb_.get<const typename K::ElementB*>(), sb_.get<typename K::StrideB>(),
                       psfa_.get<const float*>(), lsfa_.get<typename K::LayoutSFA>(),
                       psfb_.get<const float*>(), lsfb_.get<typename K::LayoutSFB>()};
    } else {
      args.mainloop = {pa_.get<const typename K::ElementA*>(), sa_.get<typename K::StrideA>(),
                       pb_.get<const typename K::ElementB*>(), sb_.get<typename K::StrideB>()};
    }
    args.epilogue.ptr_C = pc_.get<const typename K::ElementC*>();
    args.epilogue.dC = sc_.get<typename K::StrideC>();
    args.epilogue.ptr_D = pd_.get<typename K::ElementD*>();
    args.epilogue.dD = sd_.get<typename K::StrideD>();
    args.epilogue.thread.alpha = 1.0f;
    if (alpha) {
      args.epilogue.thread.alpha_ptr = alpha;
      args.epilogue.thread.dAlpha = {_0{}, _0{}, 1};  // group l reads alpha[l]
    }
    args.epilogue.thread.beta = beta;
    args.hw_info = hw;
    cutlass::Status st = gemm_.can_implement(args);
    if (st != cutlass::Status::kSuccess)
      throw std::invalid_argument(fmt::format("CUTLASS cannot implement this grouped GEMM ({})",
                                              cutlass::cutlassGetStatusString(st)));
    workspace_ = DeviceBuffer(K::Gemm::get_workspace_size(args));
    st = gemm_.initialize(args, workspace_.get());
    if (st != cutlass::Status::kSuccess)
      throw Unsupported(fmt::format("CUTLASS grouped GEMM initialize: {}", cutlass::cutlassGetStatusString(st)));
  }

  void run(cudaStream_t s) override {
    const cutlass::Status st = gemm_.run(s);
    if (st != cutlass::Status::kSuccess)
      throw Unsupported(fmt::format("CUTLASS grouped GEMM launch: {}", cutlass::cutlassGetStatusString(st)));
  }

  std::string config() const override {
    return fmt::format("cutlass sm90 ptr-array grouped {} {}", to_string(family_), K::tile());
  }

 private:
  CutlassGroupedFamily family_;
  std::vector<typename K::ProblemShape::UnderlyingProblemShape> host_shapes_;
  DeviceBuffer shapes_, pa_, pb_, pc_, pd_, sa_, sb_, sc_, sd_, workspace_;
  DeviceBuffer psfa_, psfb_, lsfa_, lsfb_;  // blockwise: per-group scale pointers and layouts
  typename K::Gemm gemm_;
};

}  // namespace gs::cuda::cutlass_kernels
