// The dance view: the reshape dance of multi-head attention (core's Dance,
// dance.h) stepped through at the shown batch's real sizes. Each step shows
// its strided layout (shape, strides, offset, contiguous) and the buffer it
// views, one cell per float coloured by the head and token that own it, twice:
// in storage order (unchanged by steps that only change strides) and in the
// order the step's view reads it (where a transpose, the naive split's mixing,
// or an expand's stride 0 reading one float for several heads, shows).
// --layout records each grid drawn as {"view": "dance" or "dance-read",
// "step", "first_row", "floats_per_row", "floats_per_cell", "storage": the
// strided layout from a position in the order drawn to the float's index in
// storage, "grid"} (the tests expand it to every float) and the step's layout
// as {"view": "dance-step", "step", "title", "code", "weights" (the stored
// weights of its projection, in words: dance.h), "shape", "strides",
// "offset", "contiguous", "buffer", "layer", "naive_view_max_diff"}.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "headscope/inspect/checks.h"
#include "headscope/inspect/dance.h"
#include "session/figure_worker.h"
#include "widgets/ui.h"

namespace headscope {

// The colour of an element owned by `head` of NH and token t of T: the head
// picks the hue (head / NH of the colour wheel), the token the lightness (HSV
// value from 0.4 for the first token to 1 for the last), saturation 0.65.
// Keys are owned by key/value heads: `head` of NKV, so that key/value head k
// has the hue of query head k * NH / NKV, the first of its group. A float
// the step's view does not read (another piece of a split) has a third of
// that value.
ImU32 owner_color(int64_t head, int NH, int64_t t, int T, bool read = true);

class DanceView {
public:
    explicit DanceView(const std::function<void()>& wake) : max_diff_(wake) {}
    void draw(const WindowState& state, const Session& session, Ui& ui);
    // 1-based; clamped to the walk's steps when drawn.
    void set_step(int step) { step_ = step; }
    // Whether the naive split's error is being computed (screenshot mode waits for it).
    bool computing() const { return max_diff_.computing(); }

private:
    // naive_view_max_diff for (the session's shown_generation, the layer).
    using MaxDiff = FigureWorker<std::pair<uint64_t, int>, double>;
    // Rebuilds the dance when the shown compute or layer changes.
    void update(const Session& session, int layer);
    void stepper();
    void describe(const WindowState& state, const Session& session, Ui& ui, const MaxDiff::Outcome* max_diff);
    void buffer_grid(const Session& session, Ui& ui);
    struct Cells {
        int64_t group;  // floats per cell
        float w, h;     // screen pixels
    };
    struct Grid {
        const char* id;                        // "dance" (the memory) or "dance-read": also its --layout view
        int64_t row;                           // floats per row
        const std::vector<std::string>& dims;  // the order drawn, row-major: its dimensions' names
        StridedLayout order;                   // position in that order (over its shape) -> storage element
    };
    // Draws the step's buffer as `g` says at the cursor, with row labels;
    // records it for --layout; returns the hovered cell's storage element, or -1.
    int64_t grid(const Session& session, Ui& ui, const Grid& g, const Cells& cells);
    void tooltip(const Session& session, int64_t storage);

    int step_ = 1;
    std::optional<Dance> dance_;
    uint64_t generation_ = 0;                      // the shown compute dance_ is for
    AttentionKind kind_ = AttentionKind::decoder;  // and the attention (an encoder–decoder's three)
    int layer_ = 0;                                // and the layer whose weights its steps name
    MaxDiff max_diff_;
    struct {
        int step = 0;
        int64_t storage = -1;
    } hovered_;  // the float under the mouse last frame, outlined in both grids
};

}  // namespace headscope
