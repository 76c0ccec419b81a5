// The kernel table behind kernels_impl.h.
#include "engine/cuda/kernels_impl.h"

#include <type_traits>

namespace tandem::cuda {
namespace {

template <class T, class V>
struct VariantIndex;
template <class T, class... Ts>
struct VariantIndex<T, std::variant<Ts...>> {
  static constexpr size_t value = [] {
    size_t i = 0;
    ((std::is_same_v<T, Ts> ? false : (++i, true)) && ...);
    return i;
  }();
};

constexpr KernelInfo kInfos[] = {
#define TANDEM_CUDA_KERNEL_INFO(entry, args, file) \
  {#entry, file, VariantIndex<kernels::args, KernelArgs>::value},
    TANDEM_CUDA_KERNELS(TANDEM_CUDA_KERNEL_INFO)
#undef TANDEM_CUDA_KERNEL_INFO
};
static_assert(sizeof(kInfos) / sizeof(kInfos[0]) == kKernelCount);

constexpr bool every_pack_known() {
  for (const KernelInfo& k : kInfos) {
    if (k.args_index >= std::variant_size_v<KernelArgs>) return false;
  }
  return true;
}
static_assert(every_pack_known(), "a kernel takes an argument pack missing from KernelArgs");

}  // namespace

const KernelInfo& kernel_info(KernelId id) { return kInfos[static_cast<size_t>(id)]; }

uint32_t kernel_dynamic_smem(KernelId id) {
  switch (id) {
    case KernelId::attention_tc2_f32_f32:
    case KernelId::attention_tc2s_f32_f16: return kernels::kTc2SmemBytes;
    case KernelId::attention_tc2_f32_f16: return kernels::kTc2SmemBytesOneStage;
    case KernelId::gemm_stream_f16_f32:
    case KernelId::gemm_stream_f16_f16:
    case KernelId::gemm_stream_bf16_f32:
    case KernelId::gemm_stream_bf16_bf16: return kernels::kGemmStreamSmemMax;
    default: return 0;
  }
}

}  // namespace tandem::cuda
