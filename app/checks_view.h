// The checks view: live figures from the tutorials for the shown compute,
// all computed by core (checks.h): the batched heads against a per-head loop,
// the causality check on the selected text, and the model's parameter and
// shape tables. The first two run on a worker with their own backend, once
// per new compute; a frame never waits for them. With --layout every figure
// shown is recorded as {"view": "checks", "figure": ..., "value": ...}.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "headscope/checks.h"
#include "model_worker.h"
#include "ui.h"

namespace headscope {

class ChecksView {
public:
    void draw(Session& session, Ui& ui);
    // Whether figures are being computed (screenshot mode waits for them).
    bool computing() const { return worker_.running(); }

private:
    struct Figures {
        uint64_t generation = 0;  // the session's shown_generation they are for
        int b = 0;                // the text the causality check edited
        HeadLoopComparison loop;
        CausalityCheck causality;
        std::string error;  // non-empty: the checks could not run
    };
    // Whether figures_ are for the shown compute and the selected text.
    bool figures_current(const Session& session) const;
    // Takes finished figures; starts them for the shown compute and selected
    // text if they are not there or running.
    void update(Session& session);
    void loop_section(const Session& session, Ui& ui, const Figures& figures);
    void causality_section(const Session& session, Ui& ui, const Figures& figures);
    void shapes_section(const Session& session);
    void parameters_section(const Session& session, Ui& ui);

    ModelWorker<Figures> worker_;
    std::optional<Figures> figures_;  // the last finished
};

}  // namespace headscope
