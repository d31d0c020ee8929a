// The mask view: the batch of texts (select, add, remove), the padding masks
// of the whole batch, and for the selected text the causal mask (T x T, shared
// by every text), the sliding window (T x T, for a model with one), its
// padding mask (1 x T, broadcast to T x T and over the heads: B x 1 x T x T),
// the combined mask the engine used (core's visible_begin..visible_end) with
// the rows that have nothing to attend to outlined, and the selected head's
// attention beside it.
#pragma once
#include <string>

#include "views/mask_panels.h"
#include "widgets/ui.h"

namespace headscope {

// With --layout every drawn mask cell is recorded as {"view": "mask", "mask":
// "causal" | "window" | "padding" | "combined", "b", "query", "key", x, y, w,
// h}; query -1 is a padding mask's 1 x T row before the broadcast.
class MaskView {
public:
    void draw(WindowState& state, Session& session, Ui& ui);
    // The batch: select, remove and add texts (also shown when the first
    // batch was refused, so the text at fault can be removed).
    void batch_list(WindowState& state, Session& session, const Ui& ui);

private:
    std::string new_text_;                             // the "add text" field
    int select_when_shown_ = -1;                       // a text just added: selected once a compute includes it
    MapWidget attention_map_{AttentionKind::decoder};  // beside the decoder's masks
};

}  // namespace headscope
