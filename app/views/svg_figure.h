// The shown view as a vector figure, for a paper at any size (Save SVG,
// --export-svg): the heads tab's maps of the selected layer (or its one head
// shown large), the model tab's every layer and head, the logit-lens grid,
// or the tokens tab's wrapped, coloured tokens. One rectangle per cell, coloured by the window's own shader (read
// back from the GPU), masked cells hatched and a learned sink's column left
// of key 0 as on screen, the token labels, each map's title, the title line (model, text, layer, options) and the
// colormap's legend.
#pragma once
#include <filesystem>

#include "state/view.h"
#include "widgets/ui.h"

namespace headscope {

class TokensView;

// Which figure: the tab shown, whether the heads tab shows one head large,
// and the tokens tab's view as last drawn.
struct FigureView {
    View view = View::heads;
    bool large_head = false;
    const TokensView* tokens = nullptr;
};

// Why `view` has no SVG figure; null when it has one.
const char* svg_refusal(View view, AttentionKind kind);

// Writes the figure of the session's shown compute to `path`, whole or not
// at all. Maps with more cells than max_figure_cells in all are max-pooled
// as the window pools them (core's heatmap_image), and then carry no token
// labels. Needs the window's GL context; throws Error naming the file or the view.
void write_svg_figure(const std::filesystem::path& path, const WindowState& state, const Session& session, Ui& ui,
                      FigureView shown);
inline constexpr int64_t max_figure_cells = int64_t{1} << 20;

}  // namespace headscope
