// The mask view's panels, side by side under the batch list: the batch's
// padding masks, then for the selected text the causal mask, the sliding
// window (a model with one), its padding mask, the combined mask, the head's
// attention (MaskView draws that one), and the legend. MaskPanels lays them
// out: one square size for all, tops aligned, titles wrapped to their panel.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "widgets/mask_grid.h"

namespace headscope {

// The whole batch's padding masks, one 1 x T row per text.
void batch_padding_masks(const WindowState& state, const Session& session, Ui& ui);
// An encoder–decoder's cross-attention mask of the selected text (T x T_src):
// only the source's padding, recorded as mask "cross"; nothing for other models.
void cross_mask(const WindowState& state, const Session& session, Ui& ui);

class MaskPanels {
public:
    // The layout of the selected text's panels in the space left; none when
    // the window is too small for them (it says so).
    static std::optional<MaskPanels> fit(const WindowState& state, const Session& session, const Ui& ui);

    // Each panel within a group: its title, then its square.
    void causal(const WindowState& state, const Session& session, Ui& ui);
    void window(const WindowState& state, const Session& session, Ui& ui);  // only for a model with a sliding window
    void padding(const WindowState& state, const Session& session, Ui& ui);
    void combined(const WindowState& state, const Session& session, Ui& ui);
    // The attention panel's title and the space above its square; the caller draws the map of side().
    void attention_title();
    float side() const { return cell_ * T_; }
    float cell() const { return cell_; }
    // Places the cursor for the next panel.
    void next();
    // The colours' legend and the count of empty rows.
    void legend(const WindowState& state, const Session& session) const;

private:
    void title();
    void above_square() const;

    std::vector<std::pair<std::string, std::string>> headers_;  // each panel's title and detail, in order
    int T_ = 0, panel_ = 0;
    float cell_ = 0, titles_ = 0, wrap_ = 0, key_row_ = 0, gap_ = 0, label_w_ = 0, panels_x_ = 0;
    float query_column_ = 0;  // the query labels' column left of the first square; 0 when rows are too short
};

// Outlines the rows of the selected text with nothing to attend to on a
// T x T grid at `origin`, each run of them as one block, labelled on its right.
void outline_empty_rows(const WindowState& state, const Session& session, ImVec2 origin, float cell);

}  // namespace headscope
