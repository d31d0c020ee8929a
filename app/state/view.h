// The window's tabs, each with its word (--view, the settings) and label.
#pragma once
#include "headscope/base/choices.h"

namespace headscope {

// In the order the tab bar shows them.
enum class View { heads, tokens, model, lens, effects, mask, dance, checks };
inline constexpr Choices<View, 8> view_choices = {
    "view",
    {"heads", "tokens", "model", "lens", "effects", "mask", "dance", "checks"},
    {"heads", "tokens", "model", "logit lens", "what heads do", "mask", "dance", "checks"}};

}  // namespace headscope
