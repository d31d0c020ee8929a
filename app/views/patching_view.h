// The patching tab: exact activation patching (core's patching.h) of the
// selected text, the clean run, and the compare text, the corrupted one.
// The metric (the logit difference of two answer tokens at a position, the
// log-probability of one, or the loss), its tokens typed or picked from both
// runs' top predictions, the direction and the components; the grids,
// computed on a worker with progress and cancel: layers x heads for the
// heads' outputs and their attention patterns, layers x positions (the
// tokens labelled) for the residual stream and the MLPs, each cell the
// fraction of the clean - corrupted difference the patch restores
// (denoising) or destroys (noising), with both runs' metric.
#pragma once
#include <string>

#include "widgets/ui.h"

namespace headscope {

class PatchingView {
public:
    void draw(WindowState& state, Session& session, Ui& ui);
    // Starts the patching the state asks for (the tab's button, --compute-patching):
    // an answer or wrong token not chosen is the clean run's top token at the
    // position, and the corrupted run's (else the clean run's second).
    static void compute(WindowState& state, Session& session);

private:
    void metric_controls(WindowState& state, Session& session, Ui& ui);
    void token_choice(const WindowState& state, const Session& session, Ui& ui, const char* name, int32_t shown,
                      int32_t& token, std::string& typed);
    void grids(const WindowState& state, Session& session, Ui& ui, const Patching& patching);

    std::string answer_typed_, wrong_typed_;  // the token boxes' text, taken on Enter
    std::string token_message_;               // why a typed text is not a token
};

}  // namespace headscope
