// What the window's views share besides the session: sizes, the colormap,
// the heatmap renderer, the --layout recorder, and the map widget they all
// draw attention maps with.
#pragma once
#include <imgui.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "session/session.h"
#include "widgets/heatmap_renderer.h"

namespace headscope {

// Text colours with a meaning, the same in every view.
inline const ImVec4 error_colour(1, 0.5f, 0.4f, 1);       // refused input, failures
inline const ImVec4 warning_colour(1, 0.75f, 0.3f, 1);    // not the model's own computation, a copy
inline const ImVec4 good_colour(0.45f, 0.85f, 0.45f, 1);  // a check that holds
// Frames the query heads that share a key/value head (grouped-query attention).
inline constexpr ImU32 group_frame_colour = IM_COL32(110, 160, 230, 255);
// A generation: its tokens' text, the replayed row's outline on every map,
// and what covers the rows after it.
inline const ImVec4 generated_colour(1, 0.62f, 0.25f, 1);
inline constexpr ImU32 replayed_row_colour = IM_COL32(255, 158, 64, 255);
inline constexpr ImU32 after_replay_colour = IM_COL32(26, 26, 31, 255);
// The cross over a knocked-out head's map.
inline constexpr ImU32 knocked_out_colour = IM_COL32(235, 70, 60, 230);

// A grid of equal cells as drawn: cell (r, c) for r < rows, c < cols has
// its top left at origin + (c * step.x, r * step.y) and is `cell` large.
struct GridLayout {
    ImVec2 origin, step, cell;
    int64_t rows = 0, cols = 0;
};

// What a frame drew where, for --layout: tests find controls, labels and
// map cells in the screenshot by it. Each entry holds the caller's fields
// and a rectangle (x, y, w, h) in framebuffer pixels, or for a grid the
// field "grid" {x, y, step_x, step_y, w, h, rows, cols}; the tests' support
// (tests/screenshot.h) expands a grid into its cells. Off unless asked for.
class LayoutRecorder {
public:
    explicit LayoutRecorder(bool on) : on_(on) {}
    void clear() { entries_.clear(); }
    // The last ImGui item.
    void item(nlohmann::ordered_json fields);
    // The last ImGui item as {"view": "control", "name": name}.
    void control(const char* name);
    // A rectangle drawn without an item (a label on the draw list).
    void rect(nlohmann::ordered_json fields, ImVec2 min, ImVec2 size);
    void grid(nlohmann::ordered_json fields, const GridLayout& grid);
    // The entries as a JSON array, one per line, written whole or not at all.
    void write(const std::filesystem::path& path) const;

private:
    bool on_;
    std::vector<nlohmann::ordered_json> entries_;
};

struct Ui {
    Ui(float scale_in, bool tooltips_in, bool record_layout)
        : scale(scale_in), tooltips(tooltips_in), layout(record_layout) {}

    float scale;    // the monitor's content scale: multiplies every size
    bool tooltips;  // off for screenshots, where the pointer is wherever Xvfb left it
    Colormap colormap = Colormap::viridis;
    HeatmapRenderer renderer;
    LayoutRecorder layout;
    bool frame_wanted = false;  // this frame changed what the next one draws: the idle window draws it
};

// Where a map's columns lie across its square of `size` screen pixels, from
// its left edge: with a learned sink (ShownMaps::sinks) the sink's column
// first, one key wide (at least 3 pixels a scale, or an eighth of a small
// square), then a small gap, then the keys; else the keys fill the square.
struct MapColumns {
    float sink = 0;    // the sink column's width
    float keys_x = 0;  // where key 0 starts
};
MapColumns map_columns(const ShownMaps& maps, const Ui& ui, float size);
// The columns of a map whose cells are `cell` pixels a side (the mask tab's,
// in line with the masks beside it): a learned sink's column one cell wide
// and its gap (sink_gap of the keys' width) left of the keys; else none.
MapColumns cell_columns(const ShownMaps& maps, const Ui& ui, float cell);
// The gap between a sink's column and key 0 on a map `size` pixels wide: 3
// pixels a scale, less on a small thumbnail.
float sink_gap(const Ui& ui, float size);

// One attention map of the shown compute, drawn by the colormap shader into
// the window each frame it is visible; its weights are pooled and uploaded
// again only when the compute, text, head, pooling or shading changes.
class MapWidget {
public:
    // The maps of `kind` (the mask tab's: the decoder's, beside its masks),
    // else of the state's attention kind (WindowState::attention_kind).
    explicit MapWidget(std::optional<AttentionKind> kind = {}) : kind_(kind) {}
    // Draws map (layer, head) of the selected text, size x size screen pixels,
    // showing `region` of it, max-pooled so the region has about as many
    // cells as pixels (zoomed in far enough, every cell). Records the whole
    // map for --layout as a grid of view `view` (rows query, columns key),
    // shows the hover tooltip and makes the row under the mouse the
    // state's hovered query (a click, its query); returns true when clicked.
    // Replaying a generation, the rows after its replayed row are covered and
    // that row outlined. With a learned sink its column is drawn left of
    // key 0 (map_columns), recorded as the grid {"view": "sink", "of": view}
    // (rows query, one column), with its own hover. A right-click knocks the head out of the forward, or
    // back in; a knocked-out head's map is crossed out. With the diff shown
    // (Session::diff_shown) the map is B - A in the diverging colormap, its
    // grid recording "diff_scale", and has no sink column.
    bool draw(WindowState& state, Session& session, Ui& ui, const char* view, int layer, int head, float size,
              const TextureRegion& region = {});
    // The whole map, as draw, in cells `cell` pixels a side: a learned sink's
    // column and its gap (cell_columns) make it that much wider than its keys.
    bool draw_cells(WindowState& state, Session& session, Ui& ui, const char* view, int layer, int head, float cell);
    // The map alone, with no labels around it (a thumbnail), recorded as the
    // item {"view": "map", "of": view, "layer", "head"} too.
    bool draw_thumbnail(WindowState& state, Session& session, Ui& ui, const char* view, int layer, int head,
                        float size);

private:
    struct ImageKey {                                      // what the uploaded weights are
        uint64_t generation = 0, compared = 0;             // the shown compute's and the compare text's
        int b = -1, layer = -1, head = -1, pooled_to = 0;  // the side pooled to (T or more: every cell)
        MapShading shading;
        AttentionKind kind = AttentionKind::decoder;
        bool diff = false;  // B - A in the diverging colormap (Session::diff_shown)
        bool operator==(const ImageKey&) const = default;
    };
    ShownMaps maps(const Session& session) const;
    // draw's and draw_cells': the map in `size` pixels, its columns as `columns` say.
    bool draw_in(WindowState& state, Session& session, Ui& ui, const char* view, int layer, int head, ImVec2 size,
                 const MapColumns& columns, const TextureRegion& region);

    std::optional<AttentionKind> kind_;
    ImageKey image_key_;
    HeatmapTexture texture_, sink_texture_;
};

// `texture`'s colours as an ImGui image of `size` screen pixels.
inline void image(const HeatmapTexture& texture, ImVec2 size) {
    ImGui::Image(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(texture.color())), size);
}

// Text as drawn: line feeds, carriage returns and tabs made visible, and
// the other control characters and each byte that starts no whole UTF-8
// character (a byte-level token's piece of one) written \xNN.
std::string visible_text(std::string_view bytes);
// The one way the window writes a token: its bytes as drawn (visible_text),
// between single quotes when `quoted` (in a sentence; axis labels go without).
std::string shown_token(const Tokenizer& tokenizer, int32_t id, bool quoted = false);
// Token t of the shown text b so, or "<pad>" past its end.
std::string shown_token(const Session& session, int b, int t, bool quoted = false);
// Token t of `ids` (a shown text's tokens, an encoder–decoder's source's) so, or "<pad>" past their end.
std::string shown_token(const Session& session, const std::vector<int32_t>& ids, int t, bool quoted = false);
// Query i's and key j's tokens of the selected text's `maps` (a cross-attention's
// keys are the source's), or "<pad>" past its end.
std::string query_token(const Session& session, const ShownMaps& maps, int i, bool quoted = false);
std::string key_token(const Session& session, const ShownMaps& maps, int j, bool quoted = false);

// `text` whole when it is at most `width` pixels wide at font size `size`,
// else cut between characters and ended with an ellipsis so that the whole
// fits: a label never ends mid-glyph. With `keep_end` (a path) the start
// is cut and the ellipsis begins it.
std::string ellipsized(const std::string& text, float size, float width, bool keep_end = false);

// The label "L1 H2" with the head's probe scores when the session has them.
std::string head_label(const Session& session, int layer, int head);

// Drawn while the job runs (its caller knows when), once it shows progress:
// a Cancel button and a bar with what the job does and how far; returns
// whether it drew them. With --layout the bar is recorded as {"view":
// "progress", "name": name, "text": ...}.
bool progress_bar(JobProgress& job, Ui& ui, const char* name, float width);

}  // namespace headscope
