// The std::visit helper: one visitor from several lambdas, each taking one alternative.
#pragma once

namespace tandem {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

}  // namespace tandem
