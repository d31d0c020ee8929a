// The colormaps the maps are drawn in, and the hatch of masked cells: what the
// GL renderer (its shader), the SVG figures and the settings share, without GL.
#pragma once
#include "headscope/base/choices.h"
#include "headscope/io/svg.h"

namespace headscope {

// The user's choice of the three first; diverging is the diff view's own.
enum class Colormap { viridis = 0, magma = 1, grey = 2, diverging = 3 };
inline constexpr Choices<Colormap, 3> colormap_choices = {
    "colormap", {"viridis", "magma", "grey"}, {"viridis", "magma", "grey"}};

// Signed values (the effects and patching grids, the diff view's B - A):
// blue below zero, red above, through a dark grey at zero. The diverging
// colormap maps [0, 1] onto them, 0.5 being zero.
inline constexpr Rgb diverging_negative{64, 128, 242}, diverging_zero{51, 51, 59}, diverging_positive{235, 77, 56};

// Masked cells: diagonal stripes 4 pixels wide in two greys, so a mask never
// reads as a weight of 0. The shader's, and the SVG export's pattern.
inline constexpr Hatch masked_hatch{{41, 41, 41}, {77, 77, 77}, 4};

// Whether text on `background` is drawn dark (a light colour: the colormaps' bright end), else light.
constexpr bool dark_text_on(Rgb background) {
    return 0.299 * background.r + 0.587 * background.g + 0.114 * background.b > 140;
}

}  // namespace headscope
