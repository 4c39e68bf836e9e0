#include "core/step/step_options.hpp"

#include <fmt/format.h>

namespace gs {

const EnumNames<Recompute>& recompute_names() {
  static const EnumNames<Recompute> n{
      {{Recompute::None, {"none"}}, {Recompute::Selective, {"selective"}}, {Recompute::Full, {"full"}}}};
  return n;
}
const char* to_string(Recompute r) { return recompute_names().name(r); }

const EnumNames<OptimizerImpl>& optimizer_names() {
  static const EnumNames<OptimizerImpl> n{
      {{OptimizerImpl::Fused, {"adamw-fused", "fused"}}, {OptimizerImpl::Foreach, {"adamw-foreach", "foreach"}}}};
  return n;
}
const char* to_string(OptimizerImpl o) { return optimizer_names().name(o); }

const EnumNames<LossImpl>& loss_names() {
  static const EnumNames<LossImpl> n{
      {{LossImpl::Auto, {"auto"}}, {LossImpl::Fused, {"fused"}}, {LossImpl::Unfused, {"unfused"}}}};
  return n;
}
const char* to_string(LossImpl l) { return loss_names().name(l); }

const EnumNames<HostForm>& host_form_names() {
  static const EnumNames<HostForm> n{{{HostForm::Auto, {"auto"}},
                                      {HostForm::Eager, {"eager"}},
                                      {HostForm::Compiled, {"compiled", "compile"}},
                                      {HostForm::CudaGraph, {"cuda-graph", "graph"}}}};
  return n;
}
const char* to_string(HostForm f) { return host_form_names().name(f); }

const EnumNames<ParamStorage>& param_storage_names() {
  // The names are step_kernels.cpp's to_string(ParamStorage): one spelling everywhere.
  static const EnumNames<ParamStorage> n{{{ParamStorage::Bf16MainFp32, {to_string(ParamStorage::Bf16MainFp32), "megatron"}},
                                          {ParamStorage::Bf16, {to_string(ParamStorage::Bf16)}},
                                          {ParamStorage::Fp32, {to_string(ParamStorage::Fp32)}}}};
  return n;
}

bool loss_fused(const StepOptions& o, StepContextKind framework) {
  if (o.loss != LossImpl::Auto) return o.loss == LossImpl::Fused;
  // Megatron-LM's published training recipes set --cross-entropy-loss-fusion (its argument default is
  // off: --loss unfused); Inductor fuses the upcast, log-softmax and NLL into its reductions; eager
  // PyTorch (Hugging Face's loss) runs logits.float() and F.cross_entropy as separate kernels.
  return framework != StepContextKind::Eager;
}

HostForm host_form(const StepOptions& o, StepContextKind framework) {
  if (o.host_form != HostForm::Auto) return o.host_form;
  return framework == StepContextKind::Compiled ? HostForm::Compiled : HostForm::Eager;
}

bool zeroes_grad_buffer(const StepOptions& o) { return o.storage == ParamStorage::Bf16MainFp32; }

std::string describe(const StepOptions& o, StepContextKind framework) {
  const std::string fw = to_string(framework == StepContextKind::None ? StepContextKind::TransformerEngine : framework);
  return fmt::format("recompute {}, {} parameters, {}, grad clip {}, loss {}{}, host {}{}", to_string(o.recompute),
                     to_string(o.storage), to_string(o.optimizer), o.grad_clip ? "on" : "off",
                     loss_fused(o, framework) ? "fused" : "unfused",
                     o.loss == LossImpl::Auto ? fmt::format(" (auto: {})", fw) : std::string(),
                     to_string(host_form(o, framework)),
                     o.host_form == HostForm::Auto ? fmt::format(" (auto: {})", fw) : std::string());
}

}  // namespace gs
