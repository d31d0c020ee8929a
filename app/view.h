// The window's tabs, each with its word (--view, the settings) and label.
#pragma once
#include "headscope/base/choices.h"

namespace headscope {

// In the order the tab bar shows them.
enum class View { heads, model, lens, mask, dance, checks };
inline constexpr Choices<View, 6> view_choices = {"view",
                                                  {"heads", "model", "lens", "mask", "dance", "checks"},
                                                  {"heads", "model", "logit lens", "mask", "dance", "checks"}};

}  // namespace headscope
