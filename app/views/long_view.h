// The long-text view, the heads tab (beside the tokens tab, the only others)
// when the shown forward kept no map (a long text, session/long_maps.h): an overview of every head (a
// layers x heads grid coloured by a summary of its rows, and the selected
// head's mean attention distance along the document), the selected head's
// map computed on demand for the pixels shown (pooled, or exact once zoomed
// to as many tokens as pixels), and the row under the mouse over every key.
#pragma once
#include <optional>
#include <tuple>

#include "widgets/ui.h"

namespace headscope {

// What colours the overview's cells: each head's mean over its query rows of
// one of the row summaries (attention.h's RowSummaries).
enum class Summary { entropy, sink, distance, previous };
inline constexpr Choices<Summary, 4> summary_choices = {
    "summary",
    {"entropy", "sink", "distance", "previous"},
    {"entropy", "sink mass (key 0)", "mean distance", "previous token"}};

class LongView {
public:
    // The range of some values, which the colormap's 0..1 spans.
    struct Span {
        float smallest = 0, largest = 0;
        float scaled(float v) const { return largest > smallest ? (v - smallest) / (largest - smallest) : 0.f; }
        float value(float scaled) const { return smallest + scaled * (largest - smallest); }
    };

    void draw(WindowState& state, Session& session, Ui& ui);
    // Shows `region` of the selected head (--rows and --cols); empty: the whole map.
    void show_region(const MapRegion& region) { region_ = region; }

private:
    void overview(WindowState& state, Session& session, Ui& ui, float width);
    void distance_strip(const WindowState& state, Session& session, Ui& ui, float width);
    void head_map(WindowState& state, Session& session, Ui& ui, float side);
    void hovered_row(WindowState& state, Session& session, Ui& ui, float width);
    // The region shown, within the map: the whole map when none is chosen.
    MapRegion region(const Session& session) const;

    Summary summary_ = Summary::entropy;
    Pooling pooling_ = Pooling::mean;
    MapRegion region_;       // in tokens; empty: the whole map
    MapRegion drag_start_;   // the region shown when the drag began
    HeatmapImage overview_;  // each head's summary, scaled by overview_span_
    Span overview_span_;
    HeatmapTexture overview_texture_, strip_texture_, map_texture_, row_texture_;
    // What the overview and the strip uploaded: the shown compute, text, summary (and head).
    std::tuple<uint64_t, int, Summary, int, int> overview_key_{};
    std::tuple<uint64_t, int, Summary, int, int, int> strip_key_{};  // and its parts
    Span strip_span_;
    int strip_cols_ = 0;
    std::optional<MapAsk> map_uploaded_, row_uploaded_;
};

}  // namespace headscope
