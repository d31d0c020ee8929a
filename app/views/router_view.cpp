// The router tab: see router_view.h.
#include "views/router_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "widgets/controls.h"
#include "widgets/texts.h"

namespace headscope {

namespace {

// Text b's route at layer l and position t: router_k experts, then their weights.
const int32_t* experts_at(const AttentionResult& att, int l, int b, int t) {
    return att.router_experts.data() + att.router_at(l, b, t);
}
const float* weights_at(const AttentionResult& att, int l, int b, int t) {
    return att.router_weights.data() + att.router_at(l, b, t);
}

// "L3", "L1 dense", or on the strip "L2 out" where its expert is knocked out of the layer.
std::string layer_label(const Session& s, int l, int strip_expert) {
    char label[24];
    const char* format = !s.model().config.expert_layer(l)                            ? "L%d dense"
                         : strip_expert >= 0 && s.expert_knocked_out(l, strip_expert) ? "L%d out"
                                                                                      : "L%d";
    std::snprintf(label, sizeof label, format, l);
    return label;
}

void route_tooltip(const WindowState& state, const Session& s, int l, int t) {
    const AttentionResult& att = s.shown.attention;
    ImGui::BeginTooltip();
    ImGui::Text("layer %d, at %s (token %d)", l, shown_token(s, state.selected, t, true).c_str(), t);
    if (!s.model().config.expert_layer(l)) {
        ImGui::TextUnformatted("a dense MLP: no router");
    } else {
        const int32_t* experts = experts_at(att, l, state.selected, t);
        const float* weights = weights_at(att, l, state.selected, t);
        float sum = 0;
        for (int k = 0; k < att.router_k && experts[k] >= 0; ++k) {
            ImGui::Text("expert %d  %.4f", experts[k], weights[k]);
            sum += weights[k];
        }
        ImGui::TextDisabled("their weights add up to %.4f", sum);
    }
    std::string out;
    for (const ExpertRef& e : s.shown_options.ablate_experts)
        if (e.layer == l) out += " " + std::to_string(e.expert);
    if (!out.empty()) ImGui::TextColored(warning_colour, "knocked out here:%s", out.c_str());
    ImGui::EndTooltip();
}

}  // namespace

ImU32 expert_colour(int expert, float value) {
    float hue = std::fmod(static_cast<float>(expert) * 0.618034f, 1.f), r = 0, g = 0, b = 0;
    ImGui::ColorConvertHSVtoRGB(hue, 0.65f, value, r, g, b);
    return ImGui::GetColorU32(ImVec4(r, g, b, 1));
}

HeatmapImage expert_weights(const WindowState& state, const Session& s, int expert) {
    const AttentionResult& att = s.shown.attention;
    const int L = att.router_layers, b = state.selected, length = s.length(b);
    HeatmapImage image{.rows = L, .cols = length, .cells = std::vector<float>(static_cast<size_t>(L) * length, 0.f)};
    for (int l = 0; l < L; ++l)
        for (int t = 0; t < length; ++t) {
            const int32_t* experts = experts_at(att, l, b, t);
            for (int k = 0; k < att.router_k; ++k)
                if (experts[k] == expert)
                    image.cells[static_cast<size_t>(l) * length + t] = weights_at(att, l, b, t)[k];
        }
    return image;
}

void RouterView::draw(WindowState& state, Session& s, Ui& ui) {
    const AttentionResult& att = s.shown.attention;
    if (att.router_k == 0) {
        ImGui::TextUnformatted("computing the routes...");
        return;
    }
    expert_ = std::clamp(expert_, 0, s.model().config.n_experts - 1);
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped(
        "The experts each layer's router chose for each token. Above: the first, its colour the expert's, brighter "
        "for a larger weight (all k: each as wide as its weight); below: one expert's weight. Hover: every choice; "
        "click: that expert below; right-click: knock the expert out of its layer (the router takes the next), or "
        "back in.");
    ImGui::PopStyleColor();
    controls(state, s, ui);
    const int L = att.router_layers, length = s.length(state.selected);
    const float line = ImGui::GetTextLineHeight(), scrollbar = ImGui::GetStyle().ScrollbarSize;
    const float label_w = ImGui::CalcTextSize("L00 dense").x + 8 * ui.scale, header = 2 * line + 4 * ui.scale;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    // Two grids of L rows, the strip's caption between them.
    const float cell_h = std::min(std::floor((avail.y - 2 * header - scrollbar) / (2 * L)), std::floor(2 * line));
    const float cell_w = std::max(1.f, std::floor((avail.x - label_w) / static_cast<float>(length)));
    if (length < 1 || avail.x - label_w < 16 || cell_h < 2) {
        ImGui::TextUnformatted("The window is too small for the router's grids.");
        return;
    }
    const ImVec2 start = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const Config& config = s.model().config;
    for (int grid = 0; grid < 2; ++grid)
        for (int l = 0; l < L; ++l) {
            const float y = start.y + (grid + 1) * header + (grid * L + l) * cell_h + (cell_h - line) / 2;
            const ImU32 colour = !config.expert_layer(l)                    ? ImGui::GetColorU32(ImGuiCol_TextDisabled)
                                 : grid && s.expert_knocked_out(l, expert_) ? knocked_out_colour
                                                                            : ImGui::GetColorU32(ImGuiCol_Text);
            if (cell_h >= line || l % 2 == 0)
                draw->AddText(ImVec2(start.x, y), colour, layer_label(s, l, grid ? expert_ : -1).c_str());
        }
    ImGui::SetCursorScreenPos(ImVec2(start.x + label_w, start.y));
    ImGui::SetNextWindowContentSize(ImVec2(cell_w * length, 0));
    ImGui::BeginChild("router grids", ImVec2(0, 2 * header + 2 * L * cell_h + scrollbar), false,
                      ImGuiWindowFlags_HorizontalScrollbar);
    grids(state, s, ui, cell_w, cell_h, header);
    ImGui::EndChild();
}

// The "all k" switch, the strip's expert and the knocked-out experts, each a button that brings it back.
void RouterView::controls(const WindowState& state, Session& s, Ui& ui) {
    checkbox(ui, "all k", &all_k_, "all k");
    if (ui.tooltips && ImGui::IsItemHovered())
        ImGui::SetTooltip("each cell split among the k experts chosen, each part as wide as its weight");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(110 * ui.scale);
    const std::string preview = "expert " + std::to_string(expert_);
    combo(ui, "##strip expert", preview.c_str(), "strip expert", [&] {
        for (int e = 0; e < s.model().config.n_experts; ++e)
            if (selectable(ui, ("expert " + std::to_string(e)).c_str(), {{"view", "strip-expert"}, {"expert", e}}))
                expert_ = e;
    });
    ImGui::SameLine();
    const std::vector<ExpertRef>& out = state.options.ablate_experts;  // as asked: the compute may follow
    if (out.empty()) {
        ImGui::TextDisabled("no expert knocked out");
    } else {
        ImGui::TextColored(warning_colour, "knocked out:");
        std::optional<ExpertRef> back;
        for (const ExpertRef& e : out) {
            ImGui::SameLine();
            const std::string name = "bring back " + std::to_string(e.layer) + "." + std::to_string(e.expert);
            std::string label = "L";  // (GCC 12 warns, wrongly, of "L" + std::string: its bug 105329)
            label += std::to_string(e.layer) + " E" + std::to_string(e.expert) + " x";
            if (button(ui, (label + "##" + name).c_str(), name.c_str())) back = e;
            if (ui.tooltips && ImGui::IsItemHovered()) ImGui::SetTooltip("bring it back");
        }
        ImGui::SameLine();
        if (button(ui, "bring all back", "bring all back")) {
            s.bring_experts_back();
            refusal_.clear();
        } else if (back) {
            refusal_ = s.toggle_expert_knock_out(back->layer, back->expert);
        }
    }
    if (!refusal_.empty()) {
        ImGui::SameLine();
        ImGui::TextColored(error_colour, "%s", refusal_.c_str());
    }
}

// Inside the scrolling child: the tokens above the columns, the routes, the
// strip's caption and the strip, of the columns in view.
void RouterView::grids(WindowState& state, Session& s, Ui& ui, float cell_w, float cell_h, float header) {
    const AttentionResult& att = s.shown.attention;
    const int L = att.router_layers, b = state.selected, length = s.length(b);
    const float line = ImGui::GetTextLineHeight(), scroll = ImGui::GetScrollX(), view_w = ImGui::GetWindowWidth();
    const ImVec2 top = ImGui::GetCursorScreenPos();
    const ImVec2 cell(cell_w, cell_h);
    const int first = std::clamp(static_cast<int>(scroll / cell_w), 0, length - 1);
    const int end = std::clamp(static_cast<int>(std::ceil((scroll + view_w) / cell_w)), first + 1, length);
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float pad = 4 * ui.scale;
    // The tokens above their columns in two staggered rows; narrow cells, every k-th.
    const int every = std::max(1, static_cast<int>(std::ceil(ImGui::CalcTextSize("MMM").x / (2 * cell_w))));
    for (int t = first / every * every; t < end; t += every) {
        const float x = top.x + t * cell_w, y = top.y + (t / every % 2 ? line : 0);
        const std::string shown = ellipsized(shown_token(s, b, t), line, 2 * every * cell_w - pad);
        drawn_text(ui, {{"view", "router-label"}, {"position", t}, {"text", shown}}, draw, ImGui::GetFontSize(),
                   ImVec2(x, y), ImGui::GetColorU32(ImGuiCol_Text), shown, ImVec2(x, y),
                   ImGui::CalcTextSize(shown.c_str()));
    }
    const ImVec2 routes_origin(top.x, std::floor(top.y + header));
    routes(state, s, ui, routes_origin, cell, first, end);
    pointer(state, s, ui, routes_origin, cell, false);
    const float strip_y = routes_origin.y + L * cell_h;
    const std::string caption = "expert " + std::to_string(expert_) + "'s weight (right-click a layer: knock it out)";
    draw->AddText(ImVec2(top.x + scroll, strip_y + header - line - 2 * ui.scale),
                  ImGui::GetColorU32(ImGuiCol_TextDisabled), caption.c_str());
    const ImVec2 strip_origin(top.x, std::floor(strip_y + header));
    strip(state, s, ui, strip_origin, cell, first, end);
    pointer(state, s, ui, strip_origin, cell, true);
}

void RouterView::routes(const WindowState& state, const Session& s, Ui& ui, ImVec2 origin, ImVec2 cell, int first,
                        int end) {
    const AttentionResult& att = s.shown.attention;
    const Config& config = s.model().config;
    const int b = state.selected;
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float line = ImGui::GetTextLineHeight(), pad = 3 * ui.scale;
    const bool numbers = cell.y >= line && cell.x >= ImGui::CalcTextSize("000").x + 2 * pad;
    for (int l = 0; l < att.router_layers; ++l)
        for (int t = first; t < end; ++t) {
            const ImVec2 min(origin.x + t * cell.x, origin.y + l * cell.y), max(min.x + cell.x, min.y + cell.y);
            if (!config.expert_layer(l)) {
                draw->AddRectFilled(min, max, dense_layer_colour);
                continue;
            }
            const int32_t* experts = experts_at(att, l, b, t);
            const float* weights = weights_at(att, l, b, t);
            draw->AddRectFilled(min, max, no_route_colour);
            if (experts[0] < 0) continue;
            if (!all_k_) {
                draw->AddRectFilled(min, max, expert_colour(experts[0], expert_value(weights[0])));
            } else {
                float x = min.x;  // each part as wide as its weight, the first at the left
                for (int k = 0; k < att.router_k && experts[k] >= 0; ++k) {
                    const float right = std::min(max.x, x + weights[k] * cell.x);
                    draw->AddRectFilled(ImVec2(x, min.y), ImVec2(right, max.y), expert_colour(experts[k], all_k_value));
                    x = right;
                }
            }
            if (numbers) {  // the first expert's number, at the left: the cell's centre keeps its colour
                const bool bright = all_k_ || expert_value(weights[0]) > 0.7f;
                draw->AddText(ImVec2(min.x + pad, min.y + (cell.y - line) / 2),
                              bright ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255),
                              std::to_string(experts[0]).c_str());
            }
        }
    ui.layout.grid({{"view", "router"}, {"row", "layer"}, {"col", "position"}},
                   {origin, cell, cell, att.router_layers, s.length(b)});
}

void RouterView::strip(const WindowState& state, const Session& s, Ui& ui, ImVec2 origin, ImVec2 cell, int first,
                       int end) {
    const AttentionResult& att = s.shown.attention;
    const Config& config = s.model().config;
    const int L = att.router_layers, b = state.selected, length = s.length(b);
    if (generation_ != s.shown_generation || b_ != b || strip_of_ != expert_) {  // once per compute, text or expert
        ui.renderer.upload(expert_weights(state, s, expert_), texture_);
        generation_ = s.shown_generation, b_ = b, strip_of_ = expert_;
    }
    ui.renderer.draw_on_screen(ui.colormap, texture_, ImVec2(origin.x + first * cell.x, origin.y),
                               ImVec2(origin.x + end * cell.x, origin.y + L * cell.y),
                               {static_cast<float>(first) / length, 0, static_cast<float>(end) / length, 1});
    ImDrawList* draw = ImGui::GetWindowDrawList();
    for (int l = 0; l < L; ++l) {
        const ImVec2 min(origin.x + first * cell.x, origin.y + l * cell.y),
            max(origin.x + end * cell.x, min.y + cell.y);
        if (!config.expert_layer(l)) draw->AddRectFilled(min, max, dense_layer_colour);
        if (s.expert_knocked_out(l, expert_)) draw->AddRect(min, max, knocked_out_colour, 0, 0, 2 * ui.scale);
    }
    ui.layout.grid({{"view", "expert-strip"}, {"expert", expert_}, {"row", "layer"}, {"col", "position"}},
                   {origin, cell, cell, L, length});
}

void RouterView::pointer(WindowState& state, Session& s, Ui& ui, ImVec2 origin, ImVec2 cell, bool strip_grid) {
    const AttentionResult& att = s.shown.attention;
    const int L = att.router_layers, length = s.length(state.selected);
    ImGui::SetCursorScreenPos(origin);
    ImGui::InvisibleButton(strip_grid ? "strip cells" : "route cells", ImVec2(cell.x * length, cell.y * L),
                           ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
    if (!ImGui::IsItemHovered() || !ui.tooltips) return;  // screenshots: the pointer is wherever Xvfb left it
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const int l = std::clamp(static_cast<int>((mouse.y - origin.y) / cell.y), 0, L - 1);
    const int t = std::clamp(static_cast<int>((mouse.x - origin.x) / cell.x), 0, length - 1);
    state.hovered_query = t;
    route_tooltip(state, s, l, t);
    if (!s.model().config.expert_layer(l)) return;
    // The expert under the mouse: the strip's, else the cell's first or, with all k, the part's.
    int expert = strip_grid ? expert_ : experts_at(att, l, state.selected, t)[0];
    if (!strip_grid && all_k_) {
        float x = origin.x + t * cell.x;
        for (int k = 0; k < att.router_k && experts_at(att, l, state.selected, t)[k] >= 0; ++k) {
            expert = experts_at(att, l, state.selected, t)[k];
            x += weights_at(att, l, state.selected, t)[k] * cell.x;
            if (mouse.x < x) break;
        }
    }
    if (expert < 0) return;
    if (ImGui::IsItemClicked(ImGuiMouseButton_Left)) {
        expert_ = expert;
        state.query = t;
    }
    if (ImGui::IsItemClicked(ImGuiMouseButton_Right)) refusal_ = s.toggle_expert_knock_out(l, expert);
}

}  // namespace headscope
