// The dance view: the reshape dance of multi-head attention (core's Dance,
// dance.h) stepped through at the shown batch's real sizes. Each step shows
// its strided layout (shape, strides, offset, contiguous) and the buffer it
// views, one cell per float coloured by the head and token that own it, twice:
// in storage order (unchanged by steps that only change strides) and in the
// order the step's view reads it (where a transpose, or the naive split's
// mixing, shows). --layout records every float's cell as {"view": "dance" or
// "dance-read", "step", "position" in that order, "index" in storage} and the
// step's layout as {"view": "dance-step", "step", "shape", "strides", "offset",
// "contiguous", "buffer", "layer", "naive_view_max_diff"}.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "headscope/checks.h"
#include "headscope/dance.h"
#include "model_worker.h"
#include "ui.h"

namespace headscope {

// The colour of an element owned by `head` of NH and token t of T: the head
// picks the hue (head / NH of the colour wheel), the token the lightness (HSV
// value from 0.4 for the first token to 1 for the last), saturation 0.65.
ImU32 owner_color(int64_t head, int NH, int64_t t, int T);

class DanceView {
public:
    void draw(Session& session, Ui& ui);
    // 1-based; clamped to the walk's steps when drawn.
    void set_step(int step) { step_ = step; }
    // Whether the naive split's error is being computed (screenshot mode waits for it).
    bool computing() const { return worker_.running(); }

private:
    struct MaxDiff {
        uint64_t generation = 0;  // the session's shown_generation it is for
        int layer = -1;           // and the layer
        double value = 0;         // naive_view_max_diff
        std::string error;        // non-empty: the comparison could not run
    };
    // Rebuilds the dance when the shown compute changes, and starts the naive
    // split's error on a worker when it is not there for the compute and layer.
    void update(Session& session);
    bool max_diff_current(const Session& session) const;
    void stepper();
    void describe(const Session& session, Ui& ui);
    void buffer_grid(const Session& session, Ui& ui);
    struct Cells {
        int64_t group;  // floats per cell
        float w, h;     // screen pixels
    };
    struct Grid {
        const char* id;                            // "dance" (the memory) or "dance-read": also its --layout view
        int64_t row;                               // floats per row
        const std::vector<std::string>& dims;      // the order drawn, row-major: its dimensions' names
        const std::vector<int64_t>& shape;         // and sizes
        std::function<int64_t(int64_t)> storage;   // position in that order -> storage element
        std::function<int64_t(int64_t)> position;  // and back
    };
    // Draws the step's buffer as `g` says at the cursor, with row labels;
    // records it for --layout; returns the hovered cell's storage element, or -1.
    int64_t grid(const Session& session, Ui& ui, const Grid& g, const Cells& cells);
    void tooltip(const Session& session, int64_t storage);

    int step_ = 1;
    std::optional<Dance> dance_;
    uint64_t generation_ = 0;                 // the shown compute dance_ is for
    ModelWorker<MaxDiff> worker_;
    std::optional<MaxDiff> max_diff_;         // the last finished
    struct {
        int step = 0;
        int64_t storage = -1;
    } hovered_;  // the float under the mouse last frame, outlined in both grids
};

}  // namespace headscope
