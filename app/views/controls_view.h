// The controls above the views: the model bar (the open model, the picker,
// the path field, the backend and a load's progress), the text box with the
// examples menu and the generation controls (or an encoder's pair) and the "compare with" text beside it, the masks,
// layer, colormap with its legend, head count, scale and split, and the note that says when the maps are not the
// model's own computation.
#pragma once
#include <string>
#include <vector>

#include "state/examples.h"
#include "widgets/ui.h"

namespace headscope {

class ControlsView {
public:
    // Reads the examples menu's file; a file that cannot be read leaves the
    // menu empty, saying why (and a warning on stderr).
    ControlsView();
    // Changes the state as the user asks; has the session recompute when the texts or options change.
    void draw(WindowState& state, Session& session, Ui& ui);

private:
    void model_bar(Session& session, Ui& ui);
    bool text_box(WindowState& state, const Session& session, Ui& ui, float width);
    void examples_menu(WindowState& state, Session& session, Ui& ui);
    void generation_controls(WindowState& state, Session& session, Ui& ui);
    void head_controls(WindowState& state, Session& session, Ui& ui, bool& changed);
    void legend(const Session& session, Ui& ui);

    std::vector<CachedModel> cached_models_;  // the picker's lists, read when it opens
    std::vector<GgufModel> gguf_models_;
    std::vector<Example> examples_;       // the examples menu's
    std::string examples_error_;          // why there are none
    std::string model_path_, text_path_;  // the path fields
    bool editing_text_ = false;           // the text box is the edit box, not the wrapped text
    int text_clicked_frame_ = -10;        // when the wrapped text was clicked (the box takes the keys)
    bool cursor_to_end_pending_ = false;  // the edit box's cursor goes to the end when it takes the keys
    HeatmapTexture legend_, masked_swatch_;
    Colormap legend_colormap_{};
    Sampling sampling_;  // "sample" and "generate"'s; "next token" is greedy
    int tokens_ = 16;    // "generate"'s
};

// The "compare with" line (compare_box.cpp): a decoder's under its generation
// controls, an encoder's under its pair, an encoder–decoder's (a source and
// its target) under its target.
void compare_box(WindowState& state, Session& session, Ui& ui);

}  // namespace headscope
