// The dance view: see dance_view.h.
#include "views/dance_view.h"

#include <algorithm>
#include <cmath>

#include "widgets/texts.h"

namespace headscope {

namespace {

// The attention weights: each query's row over the keys (a cross-attention's, over the source's).
bool is_weights(const DanceBuffer& buffer) { return buffer.dims.back() == "T_k" || buffer.dims.back() == "T_src"; }

// Whether the step's view reads only part of its buffer (a split's piece): the rest is drawn dark.
bool reads_part(const DanceStep& step, const DanceBuffer& buffer) {
    return step.layout.numel() < element_count(buffer.shape);
}

// A buffer's memory is drawn one token per row: the floats after its T
// index (C channels of q, one query row of weights, hs floats of one head's
// output), or its T_src index (a cross-attention's keys and values).
int64_t token_row(const DanceBuffer& buffer) {
    const std::vector<std::string>& dims = buffer.dims;
    const std::string tokens = std::find(dims.begin(), dims.end(), "T") != dims.end() ? "T" : "T_src";
    int64_t row = 1;
    for (size_t d = dims.size(); d-- > 0 && dims[d] != tokens;) row *= buffer.shape[d];
    return row;
}

// What index[dim] names: "head 2", "kv 1", "kv 1 for head 3" (a copy of a
// key/value head for a query head of its group; "head 3 (kv 1)" once
// copied), "token 3 ' on'", with the text first in a batch. Texts count from
// 1 as the window's text box says; heads and tokens from 0.
// Token t of text b where a buffer holds it: a source's when the buffer is
// the encoder's (its self-attention's, or the cross-attention's keys).
std::string dance_token(const Session& session, bool source, int b, int t) {
    return shown_token(session, source ? session.shown.source_ids[b] : session.shown.token_ids[b], t, true);
}

// Whether a buffer's token index `dim` (its owner's, when `dim` is empty:
// the buffer's query or token axis) counts the source's tokens.
bool of_source(AttentionKind kind, const std::vector<std::string>& dims, const std::string& dim = "") {
    if (kind == AttentionKind::encoder) return true;
    if (!dim.empty()) return dim == "T_src";
    return std::find(dims.begin(), dims.end(), "T") == dims.end();  // K and V of a cross-attention
}

std::string row_label(const Session& session, const Dance& d, const DanceBuffer& buffer,
                      const std::vector<std::string>& dims, const std::vector<int64_t>& index, int dim, bool source) {
    const std::string text = "text " + std::to_string(index[0] + 1);
    if (dim == 0) return text;
    std::string label = session.shown.token_ids.size() > 1 ? text + ", " : "";
    if (dims[dim] == "NH" && buffer.kv)
        return label + "head " + std::to_string(index[dim]) + " (kv " + std::to_string(index[dim] / d.group()) + ")";
    if (dims[dim] == "NH") return label + "head " + std::to_string(index[dim]);
    if (dims[dim] == "NKV") return label + "kv " + std::to_string(index[dim]);
    if (dims[dim] == "g") {
        const int64_t kv = index[dim - 1];
        return label + "kv " + std::to_string(kv) + " for head " + std::to_string(kv * d.group() + index[dim]);
    }
    return label + "token " + std::to_string(index[dim]) + " " +
           dance_token(session, source, static_cast<int>(index[0]), static_cast<int>(index[dim]));
}

// Every position (row-major over order's shape) that reads storage element
// `storage`: one, one per index along each axis of stride 0 (an expand), or
// none (a split's view of another piece of its buffer).
std::vector<int64_t> positions_of(const StridedLayout& order, int64_t storage) {
    if (!order.reads(storage)) return {};
    const StridedLayout row_major = StridedLayout::contiguous(order.shape);
    std::vector<int64_t> index = order.index_of(storage), positions;
    int d;
    do {
        positions.push_back(row_major.storage_index(index));
        // The next index along the stride-0 axes, the last fastest; done when every one wraps.
        for (d = static_cast<int>(index.size()) - 1; d >= 0; --d) {
            if (order.strides[d] != 0) continue;
            if (++index[d] < order.shape[d]) break;
            index[d] = 0;
        }
    } while (d >= 0);
    return positions;
}

constexpr float label_width = 150;  // the row labels right of a grid, before the scale

// The deepest dimension whose index changes only at whole rows, every at
// least `min_rows` rows: what the grid's row labels name. Returns the
// dimension and its rows per index, or -1 when none fits.
std::pair<int, int64_t> label_dimension(const std::vector<int64_t>& shape, int64_t row, int64_t min_rows) {
    int64_t inner = 1;  // floats per index of dimension d
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; inner *= shape[d--]) {
        if (inner < row || inner % row || shape[d] == 1) continue;  // a size-1 dimension's label never changes
        if (inner / row >= min_rows) return {d, inner / row};
    }
    return {-1, 0};
}

}  // namespace

ImU32 owner_color(int64_t head, int NH, int64_t t, int T, bool read) {
    float r, g, b;
    const float value = (0.4f + 0.6f * static_cast<float>(t) / static_cast<float>(std::max(1, T - 1))) / (read ? 1 : 3);
    ImGui::ColorConvertHSVtoRGB(static_cast<float>(head) / static_cast<float>(NH), 0.65f, value, r, g, b);
    return ImGui::ColorConvertFloat4ToU32(ImVec4(r, g, b, 1));
}

// The dance of the attention the selector shows: the decoder's (every
// model's), or an encoder–decoder's encoder's or cross-attention's, with the
// weights of that attention's layer `layer` (an encoder's own).
void DanceView::update(const Session& session, int layer) {
    const AttentionKind kind = session.maps().kind;
    if (dance_ && generation_ == session.shown_generation && kind_ == kind && layer_ == layer) return;
    const AttentionResult& att = session.shown.attention;
    const Model& model = session.model();
    const std::vector<LayerWeights>& layers = kind == AttentionKind::encoder ? model.encoder->layers : model.layers;
    const LayerWeights* weights = layer >= 0 && layer < static_cast<int>(layers.size()) ? &layers[layer] : nullptr;
    const AttentionOptions& o = session.shown_options;
    if (kind == AttentionKind::cross)
        dance_ = cross_attention_dance(att.B, att.T, att.S, model.config, o.n_head, weights);
    else if (kind == AttentionKind::encoder)
        dance_ = reshape_dance(att.B, att.S, encoder_config(model.config), o.n_head, o.split, weights);
    else
        dance_ = reshape_dance(att.B, att.T, model.config, o.n_head, o.split, weights);
    generation_ = session.shown_generation;
    kind_ = kind;
    layer_ = layer;
    hovered_ = {};  // a float of the old buffers
}

void DanceView::draw(const WindowState& state, const Session& session, Ui& ui) {
    update(session, state.layer);
    // The naive split's error for the shown compute and layer: two forwards as
    // far as the layer (of the decoder's self-attention, the forward's own).
    const MaxDiff::Outcome* max_diff = nullptr;
    if (kind_ == AttentionKind::decoder)
        max_diff = max_diff_.get({session.shown_generation, state.layer}, [&] {
            Batch batch{session.shown.token_ids, session.model().config.pad_id()};
            batch.source_ids = session.shown.source_ids;
            return [model = session.shared_model(), batch = std::move(batch), options = session.shown_options,
                    layer = state.layer](std::stop_token) {
                return naive_view_max_diff(*own_cpu_backend(*model), batch, options, layer);
            };
        });
    step_ = std::clamp(step_, 1, static_cast<int>(dance_->steps.size()));
    stepper();
    describe(state, session, ui, max_diff);
    buffer_grid(session, ui);
}

// Previous/Next buttons, and the arrow or , . keys when no text field has the keyboard.
void DanceView::stepper() {
    const int steps = static_cast<int>(dance_->steps.size());
    ImGui::BeginDisabled(step_ == 1);
    if (ImGui::Button("< Previous")) --step_;
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::BeginDisabled(step_ == steps);
    if (ImGui::Button("Next >")) ++step_;
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::TextDisabled("step %d of %d (keys: left/right or , and .)", step_, steps);
    if (!ImGui::GetIO().WantTextInput) {
        // , and . as typed characters: ImGui 1.86 has no key names for them.
        const ImVector<ImWchar>& typed = ImGui::GetIO().InputQueueCharacters;
        auto typed_key = [&](ImWchar c) { return std::find(typed.begin(), typed.end(), c) != typed.end(); };
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow)) || typed_key(','))
            step_ = std::max(step_ - 1, 1);
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow)) || typed_key('.'))
            step_ = std::min(step_ + 1, steps);
    }
}

void DanceView::describe(const WindowState& state, const Session& session, Ui& ui, const MaxDiff::Outcome* max_diff) {
    const Dance& d = *dance_;
    const DanceStep& step = d.steps[step_ - 1];
    const DanceBuffer& buffer = d.buffers[step.buffer];
    const StridedLayout& layout = step.layout;

    ImGui::BeginGroup();
    ImGui::TextWrapped("%d. %s", step_, step.title.c_str());
    ImGui::TextColored(ImVec4(0.55f, 0.8f, 1, 1), "    %s", step.code.c_str());
    for (const std::string& weight : step.weights) ImGui::TextWrapped("layer %d: %s.", state.layer, weight.c_str());
    ImGui::Text("shape %s %s    strides %s    storage offset %lld    contiguous: %s",
                shape_string(layout.shape).c_str(), shape_string(step.dims).c_str(),
                shape_string(layout.strides).c_str(), static_cast<long long>(layout.offset),
                layout.is_contiguous() ? "yes" : "no");

    // Which steps see this memory, and whether this one moved any float.
    std::string sharing;
    for (size_t s = 0; s < d.steps.size(); ++s)
        if (d.steps[s].buffer == step.buffer) sharing += (sharing.empty() ? "" : ", ") + std::to_string(s + 1);
    ImGui::Text("views buffer '%s', written as %s %s; steps viewing it: %s", buffer.name.c_str(),
                shape_string(buffer.dims).c_str(), shape_string(buffer.shape).c_str(), sharing.c_str());
    if (step_ > 1 && d.steps[step_ - 2].buffer == step.buffer)
        ImGui::TextColored(good_colour, "same memory as step %d, new shape and strides: no float moved", step_ - 1);
    else if (step_ > 1)
        ImGui::TextColored(warning_colour, "a new buffer: this step writes every float");
    end_group(ui, {{"view", "dance-step"},
                   {"step", step_},
                   {"title", step.title},
                   {"code", step.code},
                   {"weights", step.weights},
                   {"buffer", buffer.name},
                   {"shape", layout.shape},
                   {"strides", layout.strides},
                   {"offset", layout.offset},
                   {"contiguous", layout.is_contiguous()},
                   {"layer", state.layer},
                   {"naive_view_max_diff",
                    max_diff && max_diff->error.empty() ? nlohmann::ordered_json(max_diff->result) : nullptr}});

    if (d.S > 0)  // the cross-attention's walk is the correct split's only
        ImGui::TextDisabled("The cross-attention splits its heads as the self-attention does: view, then transpose.");
    else if (kind_ == AttentionKind::encoder)
        ImGui::TextDisabled(
            "The naive split's error is measured on the decoder's self-attention: choose it in the "
            "attention menu.");
    else if (!max_diff)
        ImGui::TextDisabled("Comparing layer %d's output under the naive split with the correct one...", state.layer);
    else if (!max_diff->error.empty())
        ImGui::TextColored(error_colour, "naive split not compared: %s", max_diff->error.c_str());
    else if (d.split == Split::naive_view)
        ImGui::TextColored(warning_colour,
                           "The naive split runs without an error, yet layer %d's attention output (heads merged, "
                           "before %s) differs from the correct split's by up to %.4g.",
                           state.layer, module_name(session.model().config, Weight::attn_proj_w).c_str(),
                           max_diff->result);
    else
        ImGui::TextDisabled(
            "The naive view(B, NH, T, hs) would change layer %d's attention output by up to %.4g "
            "(choose the split \"naive view\" above to walk it).",
            state.layer, max_diff->result);
}

// Two grids side by side: the buffer's memory in storage order (identical
// for every step on the same buffer), and the same floats in the order the
// step's view reads them (row-major over its shape), which is where a
// transpose or a naive view shows. The second is left out where it would
// repeat the first (a contiguous view in rows of the same width).
void DanceView::buffer_grid(const Session& session, Ui& ui) {
    const Dance& d = *dance_;
    const DanceStep& step = d.steps[step_ - 1];
    const DanceBuffer& buffer = d.buffers[step.buffer];
    const bool weights = is_weights(buffer);
    const int64_t memory_row = token_row(buffer), view_row = step.layout.shape.back();
    const bool read_grid = !step.layout.is_contiguous() || view_row != memory_row;
    // Consecutive floats of one owner, in both orders: a whole weights row, or one head's hs channels of a token.
    const int64_t run = weights ? buffer.shape.back() : d.hs;

    // Floats per cell: the smallest divisor of run that lets the grids fit across, so a cell never mixes owners.
    const float spacing = 16 * ui.scale, label_w = label_width * ui.scale;
    const float min_cell = std::max(3.f, 3 * ui.scale), max_cell = 36 * ui.scale;
    const float width = ImGui::GetContentRegionAvail().x - (read_grid ? 2 * label_w + spacing : label_w);
    const int64_t across = memory_row + (read_grid ? view_row : 0);
    int64_t group = 1;
    while (group < run && (run % group || width / static_cast<float>(across / group) < min_cell)) ++group;

    ImGui::Text("%s: the memory of '%s' in storage order, rows of %lld floats (%s).", read_grid ? "Left" : "Below",
                buffer.name.c_str(), static_cast<long long>(memory_row),
                weights                                              ? "one query row of weights"
                : buffer.dims[1] == "T" || buffer.dims[1] == "T_src" ? "one token's channels"
                : buffer.name == "y"                                 ? "one head's output for one token"
                                                                     : "one head's hs values for one token");
    if (read_grid)
        ImGui::Text("Right: the same floats in the order this step's view reads them, row-major over %s.",
                    shape_string(step.dims).c_str());
    else
        ImGui::TextUnformatted("The view is contiguous: it reads the memory in storage order.");
    if (group > 1)
        ImGui::TextColored(warning_colour,
                           "Too many floats to draw one by one: each cell is %lld consecutive floats of one owner.",
                           static_cast<long long>(group));
    ImGui::TextUnformatted("Hue: head");
    for (int h = 0; h < std::min(d.NH, 16); ++h) {
        ImGui::SameLine();
        ImGui::ColorButton(("head " + std::to_string(h)).c_str(),
                           ImGui::ColorConvertU32ToFloat4(owner_color(h, d.NH, d.T - 1, std::max(d.T, d.S))),
                           ImGuiColorEditFlags_NoTooltip);
        ImGui::SameLine(0, 2 * ui.scale);
        ImGui::Text("%d", h);
    }
    ImGui::SameLine();
    ImGui::TextUnformatted(d.NH > 16 ? "...  lightness: token (dark first)" : "  lightness: token (dark first)");
    if (buffer.kv)
        ImGui::Text("These are keys: key/value head k has the hue of query head k x %d, the first of its group.",
                    d.group());
    if (reads_part(step, buffer))
        ImGui::Text("Dark: the floats of '%s' this step's view does not read (the split's other pieces).",
                    buffer.name.c_str());

    // One cell width for both grids (a float is as wide in each); each grid's rows fill the height.
    const float cell_w = std::max(min_cell, std::floor(std::min(max_cell, width / static_cast<float>(across / group))));
    const auto cells = [&](int64_t rows) {
        const float height = ImGui::GetContentRegionAvail().y / static_cast<float>(rows);
        return Cells{group, cell_w, std::floor(std::clamp(height, min_cell, max_cell))};
    };
    int64_t hovered = grid(session, ui, {"dance", memory_row, buffer.dims, StridedLayout::contiguous(buffer.shape)},
                           cells(element_count(buffer.shape) / memory_row));
    if (read_grid) {
        ImGui::SameLine(0, spacing);
        const int64_t hovered_read =
            grid(session, ui, {"dance-read", view_row, step.dims, step.layout}, cells(step.layout.numel() / view_row));
        if (hovered_read >= 0) hovered = hovered_read;
    }
    hovered_ = {step_, hovered};
    if (hovered >= 0) tooltip(session, hovered);
}

int64_t DanceView::grid(const Session& session, Ui& ui, const Grid& g, const Cells& cells) {
    const Dance& d = *dance_;
    const DanceStep& step = d.steps[step_ - 1];
    const int buffer = step.buffer;
    const bool partial = reads_part(step, d.buffers[buffer]);
    const int64_t cols = g.row / cells.group, rows = g.order.numel() / g.row;
    ImGui::BeginGroup();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton(g.id, ImVec2(cols * cells.w, rows * cells.h));
    const bool hovered = ImGui::IsItemHovered();
    const float gap = cells.w >= 5 && cells.h >= 5 ? 1.f : 0.f;

    // Only the rows in view are drawn (a large buffer scrolls).
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const int64_t first_row =
        std::max<int64_t>(0, static_cast<int64_t>((draw->GetClipRectMin().y - origin.y) / cells.h));
    const int64_t end_row =
        std::min<int64_t>(rows, static_cast<int64_t>(std::ceil((draw->GetClipRectMax().y - origin.y) / cells.h)));
    for (int64_t r = first_row; r < end_row; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t position = r * g.row + c * cells.group;
            const int64_t storage = g.order.storage_index(position);
            const ElementOwner owner = d.owner(buffer, storage);
            const ImVec2 min(origin.x + c * cells.w, origin.y + r * cells.h);
            draw->AddRectFilled(min, ImVec2(min.x + cells.w - gap, min.y + cells.h - gap),
                                owner_color(owner.head, d.heads(owner), owner.t, std::max(d.T, d.S),
                                            !partial || step.layout.reads(storage)));
        }
    ui.layout.grid({{"view", g.id},
                    {"step", step_},
                    {"first_row", first_row},
                    {"floats_per_row", g.row},
                    {"floats_per_cell", cells.group},
                    {"storage", {{"shape", g.order.shape}, {"strides", g.order.strides}, {"offset", g.order.offset}}}},
                   {ImVec2(origin.x, origin.y + first_row * cells.h), ImVec2(cells.w, cells.h),
                    ImVec2(cells.w, cells.h), std::max<int64_t>(0, end_row - first_row), cols});

    // The float hovered last frame, outlined in both grids: where it sits in
    // memory and everywhere the view's order reads it.
    if (hovered_.step == step_ && hovered_.storage >= 0)
        for (int64_t position : positions_of(g.order, hovered_.storage)) {
            const ImVec2 min(origin.x + position % g.row / cells.group * cells.w,
                             origin.y + position / g.row * cells.h);
            draw->AddRect(ImVec2(min.x - 1, min.y - 1), ImVec2(min.x + cells.w + 1, min.y + cells.h + 1),
                          IM_COL32_WHITE, 0, 0, 2);
        }

    // Labels right of the rows, where they fit: "token 3", "head 1", with a line between blocks of rows.
    const auto [dim, block] =
        label_dimension(g.order.shape, g.row, static_cast<int64_t>(std::ceil(ImGui::GetTextLineHeight() / cells.h)));
    const float right = origin.x + cols * cells.w;
    if (dim >= 0)
        for (int64_t r = first_row - first_row % block; r < end_row; r += block) {
            const std::vector<int64_t> index = StridedLayout::contiguous(g.order.shape).index_of(r * g.row);
            const std::string label =
                row_label(session, d, d.buffers[buffer], g.dims, index, dim, of_source(kind_, g.dims, g.dims[dim]));
            const float y = origin.y + r * cells.h;
            draw->AddText(ImVec2(right + 4 * ui.scale, y), ImGui::GetColorU32(ImGuiCol_TextDisabled), label.c_str());
            if (block > 1 && r > 0)
                draw->AddLine(ImVec2(origin.x, y - 0.5f), ImVec2(right + label_width * ui.scale, y - 0.5f),
                              ImGui::GetColorU32(ImGuiCol_TextDisabled));
        }
    ImGui::SameLine(0, 0);
    ImGui::Dummy(ImVec2(label_width * ui.scale, 1));
    ImGui::EndGroup();

    if (!ui.tooltips || !hovered) return -1;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const int64_t r = std::clamp<int64_t>(static_cast<int64_t>((mouse.y - origin.y) / cells.h), 0, rows - 1);
    const int64_t c = std::clamp<int64_t>(static_cast<int64_t>((mouse.x - origin.x) / cells.w), 0, cols - 1);
    return g.order.storage_index(r * g.row + c * cells.group);
}

// Whose float it is, and where it sits as written and under this step's view.
void DanceView::tooltip(const Session& session, int64_t storage) {
    const Dance& d = *dance_;
    const DanceStep& step = d.steps[step_ - 1];
    const DanceBuffer& buffer = d.buffers[step.buffer];
    const ElementOwner owner = d.owner(step.buffer, storage);
    ImGui::BeginTooltip();
    ImGui::Text("storage element %lld of '%s'", static_cast<long long>(storage), buffer.name.c_str());
    ImGui::Text(
        "text %lld, %stoken %lld %s, %s %lld", static_cast<long long>(owner.b + 1), is_weights(buffer) ? "query " : "",
        static_cast<long long>(owner.t),
        dance_token(session, of_source(kind_, buffer.dims), static_cast<int>(owner.b), static_cast<int>(owner.t))
            .c_str(),
        owner.kv ? "key/value head" : "head", static_cast<long long>(owner.head));
    ImGui::Text("as written %s: %s", shape_string(buffer.dims).c_str(),
                shape_string(StridedLayout::contiguous(buffer.shape).index_of(storage)).c_str());
    const size_t copies = positions_of(step.layout, storage).size();
    if (copies == 0)
        ImGui::Text("not read by this step's view %s: another piece of '%s'", shape_string(step.dims).c_str(),
                    buffer.name.c_str());
    else
        ImGui::Text("under this step's view %s: %s%s", shape_string(step.dims).c_str(),
                    shape_string(step.layout.index_of(storage)).c_str(),
                    copies > 1
                        ? (" and the other " + std::to_string(copies - 1) + " indices of its stride-0 axis").c_str()
                        : "");
    ImGui::EndTooltip();
}

}  // namespace headscope
