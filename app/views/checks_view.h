// The checks view: live figures from the tutorials for the shown compute,
// all computed by core (checks.h): the batched heads against a per-head loop,
// the causality check on the selected text, and the model's configuration,
// parameter and shape tables. The first two run on a worker with their own
// backend, once per new compute; a frame never waits for them, and one that
// takes longer than 300 ms shows its progress, with Cancel. With --layout
// every figure shown is recorded as {"view": "checks", "figure": ...,
// "value": ...}, the sizes line and every configuration row as {"view":
// "checks-config", "name": ..., "text": ...}, every shape row as {"view":
// "checks-shape", "name", "dims", "shape"}.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>

#include "headscope/inspect/checks.h"
#include "session/figure_worker.h"
#include "widgets/ui.h"

namespace headscope {

class ChecksView {
public:
    explicit ChecksView(const std::function<void()>& wake) : figures_(wake) {}
    void draw(const WindowState& state, const Session& session, Ui& ui);
    // Whether figures are being computed (screenshot mode waits for them).
    bool computing() const { return figures_.computing(); }

private:
    struct Figures {
        HeadLoopComparison loop;
        CausalityCheck causality;
    };
    using Key = std::pair<uint64_t, int>;  // the session's shown_generation, and the text the causality check edits
    void loop_section(const Session& session, Ui& ui, const Figures& figures);
    void causality_section(const Session& session, Ui& ui, const Figures& figures, int b);
    void shapes_section(const Session& session, Ui& ui);
    void parameters_section(const Session& session, Ui& ui);

    JobProgress progress_;  // the figures' job's; before figures_, whose worker writes it
    FigureWorker<Key, Figures> figures_;
};

}  // namespace headscope
