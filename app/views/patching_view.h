// The patching tab: activation patching of the selected text, the clean
// run, and the compare text, the corrupted one: exact (core's patching.h),
// estimated by attribution (backward.h), or both side by side.
// The metric (the logit difference of two answer tokens at a position, the
// log-probability of one, or the loss), its tokens typed or picked from both
// runs' top predictions, the direction and the components; the grids,
// computed on a worker with progress and cancel: layers x heads for the
// heads' outputs and their attention patterns, layers x positions (the
// tokens labelled) for the residual stream and the MLPs, each cell the
// fraction of the clean - corrupted difference the patch restores
// (denoising) or destroys (noising), with both runs' metric. A click on a
// cell shows its patched run's maps (the heads and model tabs) and
// predictions in place of the text's own, with a line that says which
// patch is shown and a way back.
#pragma once
#include <string>
#include <vector>

#include "widgets/ui.h"

namespace headscope {

class PatchingView {
public:
    void draw(WindowState& state, Session& session, Ui& ui);
    // Starts the patching the state asks for (the tab's button, --compute-patching):
    // an answer or wrong token not chosen is the clean run's top token at the
    // position, and the corrupted run's (else the clean run's second).
    static void compute(WindowState& state, Session& session);
    // "the patched run: the corrupted text (B) with L1 H2's output from the clean text (A)", and so on.
    static std::string patched_run_label(const Session& session, const Comparison::PatchedRun& run);
    // The line that says which patched run is shown, with the button back to the text's own.
    static void patched_run_line(Session& session, Ui& ui, const Comparison::PatchedRun& run);

private:
    // A grid drawn: of the exact values or the estimate, beside the other
    // method's grid of its kind where both are shown (else null), on `scale`.
    struct GridShown {
        const PatchGrid* grid;
        const PatchGrid* other;
        bool estimated;
        float scale;
    };
    // Whether grid g takes half the width, and whether it goes beside the grid before it.
    static bool half_width(const std::vector<GridShown>& shown, size_t g, bool both);
    static bool beside_last(const std::vector<GridShown>& shown, size_t g, bool both);
    void grid(const WindowState& state, Session& session, Ui& ui, const GridShown& shown, float width, float height);
    void metric_controls(WindowState& state, Session& session, Ui& ui);
    void token_choice(const WindowState& state, const Session& session, Ui& ui, const char* name, int32_t shown,
                      int32_t& token, std::string& typed);
    void grids(const WindowState& state, Session& session, Ui& ui);

    std::string answer_typed_, wrong_typed_;  // the token boxes' text, taken on Enter
    std::string token_message_;               // why a typed text is not a token
};

}  // namespace headscope
