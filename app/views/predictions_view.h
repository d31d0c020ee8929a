// The predictions panel beside the maps: what the model predicts after the
// hovered (else clicked, else last) query row of the selected text: the top
// Session::predictions_k next tokens with probability bars and, where the
// text goes on, the rank and probability of the token that actually follows.
#pragma once
#include "widgets/ui.h"

namespace headscope {

// Each bar's track is a fixed width; its filled part is p of it, in this colour.
inline constexpr ImU32 prediction_bar_colour = IM_COL32(90, 170, 240, 255);
inline constexpr ImU32 prediction_track_colour = IM_COL32(50, 52, 62, 255);

// Draws the panel into the space left; records each bar's track for
// --layout as {"view": "prediction", "rank", "id", "token", "p"} and the
// actual next token as {"view": "prediction-next", "id", "rank" (0: not in
// the top), "p"}. With a compare text, both texts' top 5 side by side, each
// recorded as {"view": "compare-prediction", "text": "A" or "B", "rank", "id",
// "p"}, and, of different lengths, {"view": "compare-lengths", "text"}.
void predictions_panel(const WindowState& state, const Session& session, Ui& ui);

}  // namespace headscope
