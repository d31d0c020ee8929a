// The window's tabs, each with its word (--view, the settings) and label.
#pragma once
#include "headscope/base/choices.h"

namespace headscope {

// In the order the tab bar shows them.
// The router tab is shown for a mixture of experts only.
enum class View { heads, tokens, model, router, lens, effects, patching, mask, dance, checks };
inline constexpr Choices<View, 10> view_choices = {
    "view",
    {"heads", "tokens", "model", "router", "lens", "effects", "patching", "mask", "dance", "checks"},
    {"heads", "tokens", "model", "router", "logit lens", "what heads do", "patching", "mask", "dance", "checks"}};

}  // namespace headscope
