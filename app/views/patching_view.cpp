// The patching tab: see patching_view.h.
#include "views/patching_view.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "widgets/controls.h"
#include "widgets/signed_grid.h"
#include "widgets/texts.h"

namespace headscope {

namespace {

// What the grids depend on of the forward's options: what core's patching does not set itself.
AttentionOptions patch_options(AttentionOptions options) {
    options.top_k = options.lens_k = 0, options.contributions = options.capture_outputs = false;
    options.layers.clear();
    return options;
}

// The position the metric reads, resolved: -1 is the last token.
int patch_position(const WindowState& state, const Session& s) {
    const int last = s.length(state.selected) - 1;
    return state.patch.position < 0 ? last : std::min(state.patch.position, last);
}

// The clean (A) and corrupted (B) runs' top predictions at the metric's position.
const Prediction* clean_top(const WindowState& state, const Session& s) {
    return s.shown.attention.predictions_at(state.selected, patch_position(state, s));
}
const Prediction* corrupted_top(const WindowState& state, const Session& s) {
    return s.comparison().attention().predictions_at(0, patch_position(state, s));
}

// The answer and wrong tokens as patching_view.h's compute resolves them.
std::pair<int32_t, int32_t> resolved_tokens(const WindowState& state, const Session& s) {
    const Prediction* a = clean_top(state, s);
    const int32_t answer = state.patch.answer >= 0 ? state.patch.answer : a[0].id;
    const int32_t corrupted = corrupted_top(state, s)[0].id;
    const int32_t wrong = state.patch.wrong >= 0 ? state.patch.wrong : corrupted != answer ? corrupted : a[1].id;
    return {answer, wrong};
}

// The value a grid's cell shows in the tooltip, in words.
const char* fraction_words(PatchDirection direction) {
    return direction == PatchDirection::denoise ? "of the clean - corrupted difference restored"
                                                : "of the clean - corrupted difference destroyed";
}

}  // namespace

void PatchingView::compute(WindowState& state, Session& s) {
    const auto [answer, wrong] = resolved_tokens(state, s);
    std::vector<PatchKind> kinds;
    for (int k = 0; k < 4; ++k)
        if (state.patch.kinds[k]) kinds.push_back(static_cast<PatchKind>(k));
    const PatchRequest request{state.patch.metric,    answer, wrong, patch_position(state, s),
                               state.patch.direction, kinds};
    s.comparison().compute_patching(s.shown.token_ids[state.selected], s.comparison().token_ids(),
                                    patch_options(state.options), request);
}

void PatchingView::draw(WindowState& state, Session& s, Ui& ui) {
    const Config& config = s.model().config;
    if (config.is_encoder() || config.is_encoder_decoder() || !config.predicts()) {
        ImGui::TextDisabled("patching measures a decoder's predictions: this model is not one");
        return;
    }
    Comparison& compare = s.comparison();
    if (!s.same_lengths() || compare.attention().top_k == 0) {
        const std::string line =
            compare.length() == 0
                ? std::string("type a compare text (B) beside the text: patching copies activations between the two")
                : "patching copies activations position by position, so it needs equal lengths: B has " +
                      std::to_string(compare.length()) + " tokens, the text " +
                      std::to_string(s.length(state.selected));
        text_wrapped(ui, {{"view", "patching-lengths"}, {"text", line}}, "%s", line.c_str());
        return;
    }
    ImGui::TextDisabled("clean: the text (A); corrupted: the compare text (B)");
    metric_controls(state, s, ui);
    if (compare.patching_pending()) {
        if (!progress_bar(compare.patching_progress(), ui, "patching", std::floor(400 * ui.scale)))
            ImGui::TextDisabled("patching...");
    } else if (button(ui, compare.patching() ? "Patch again" : "Patch", "patch")) {
        compute(state, s);
    }
    if (!compare.patching_message.empty()) ImGui::TextColored(error_colour, "%s", compare.patching_message.c_str());
    if (const Patching* patching = compare.patching()) grids(state, s, ui, *patching);
}

void PatchingView::metric_controls(WindowState& state, Session& s, Ui& ui) {
    PatchChoices& patch = state.patch;
    enum_combo(ui, "metric", patch.metric, patch_metric_choices.labels, std::floor(170 * ui.scale), "metric");
    ImGui::SameLine();
    enum_combo(ui, "direction", patch.direction, patch_direction_choices.labels, std::floor(200 * ui.scale),
               "direction");
    for (int k = 0; k < 4; ++k) {
        ImGui::SameLine();
        checkbox(ui, patch_kind_choices.labels[k], &patch.kinds[k], patch_kind_choices.words[k]);
    }
    if (patch.metric == PatchMetric::loss) {
        ImGui::TextDisabled("the mean over positions 0..T-2 of -log p of the clean text's next token");
        return;
    }
    const int T = s.length(state.selected);
    int position = patch_position(state, s);
    ImGui::SetNextItemWidth(std::floor(160 * ui.scale));
    if (slider_int(ui, "position", &position, 0, T - 1, "patch position"))
        patch.position = position == T - 1 ? -1 : position;
    ImGui::SameLine();
    ImGui::Text("%s", shown_token(s, state.selected, position, true).c_str());
    const auto [answer, wrong] = resolved_tokens(state, s);
    ImGui::SameLine();
    token_choice(state, s, ui, "answer", answer, patch.answer, answer_typed_);
    if (patch.metric == PatchMetric::logit_diff) {
        ImGui::SameLine();
        token_choice(state, s, ui, "wrong", wrong, patch.wrong, wrong_typed_);
    }
    if (!token_message_.empty()) ImGui::TextColored(error_colour, "%s", token_message_.c_str());
}

// A token of the metric, `shown` now: picked from both runs' top predictions
// at the position, or typed (a text of exactly one token, taken on Enter).
void PatchingView::token_choice(const WindowState& state, const Session& s, Ui& ui, const char* name, int32_t shown,
                                int32_t& token, std::string& typed) {
    const Tokenizer& tokenizer = s.model().tokenizer;
    ImGui::PushID(name);
    ImGui::SetNextItemWidth(std::floor(140 * ui.scale));
    combo(ui, name, shown_token(tokenizer, shown, true).c_str(), name, [&] {
        const int k_max = s.shown.attention.top_k;
        const std::pair<const char*, const Prediction*> runs[] = {{"A", clean_top(state, s)},
                                                                  {"B", corrupted_top(state, s)}};
        for (const auto& [run, top] : runs)
            for (int k = 0; k < k_max && top[k].id >= 0; ++k) {
                const std::string label =
                    std::string(run) + " " + std::to_string(k + 1) + "  " + shown_token(tokenizer, top[k].id, true);
                if (selectable(ui, label.c_str(), {{"view", "control"}, {"name", name}, {"id", top[k].id}}))
                    token = top[k].id;
            }
    });
    ui.layout.item({{"view", "patch-token"}, {"name", name}, {"id", shown}});
    ImGui::SameLine();
    ImGui::SetNextItemWidth(std::floor(90 * ui.scale));
    if (text_input(ui, "##typed", "or type", &typed, nullptr, ImGuiInputTextFlags_EnterReturnsTrue)) {
        const std::vector<int32_t> ids = tokenizer.encode(typed, false);
        token_message_ = ids.size() == 1 ? "" : "'" + typed + "' is " + std::to_string(ids.size()) + " tokens, not one";
        if (ids.size() == 1) token = ids[0];
    }
    ImGui::PopID();
}

void PatchingView::grids(const WindowState& state, Session& s, Ui& ui, const Patching& p) {
    const Tokenizer& tokenizer = s.model().tokenizer;
    const PatchRequest& r = p.request;
    std::string metric = to_string(r.metric);
    if (r.metric != PatchMetric::loss) metric += " of " + shown_token(tokenizer, r.answer, true);
    if (r.metric == PatchMetric::logit_diff) metric += " - " + shown_token(tokenizer, r.wrong, true);
    if (r.metric != PatchMetric::loss) metric += " at " + std::to_string(r.position);
    text(ui,
         {{"view", "patch-metric"},
          {"metric", to_string(r.metric)},
          {"answer", r.answer},
          {"wrong", r.wrong},
          {"position", r.position},
          {"direction", to_string(r.direction)},
          {"clean", p.clean_metric},
          {"corrupted", p.corrupted_metric}},
         "%s: clean %.4f, corrupted %.4f (%s)", metric.c_str(), p.clean_metric, p.corrupted_metric,
         patch_direction_choices.labels[static_cast<int>(r.direction)]);
    if (!s.comparison().patching_current(s.shown.token_ids[state.selected], patch_options(state.options)))
        ImGui::TextColored(warning_colour, "computed for other texts or options: patch again");
    std::vector<std::string> heads, positions;
    for (int h = 0; h < p.NH; ++h) heads.push_back(indexed('H', h));
    for (int t = 0; t < p.T; ++t) positions.push_back(shown_token(s, state.selected, t));
    const float width = ImGui::GetContentRegionAvail().x, spacing = ImGui::GetStyle().ItemSpacing.x;
    const float label_w = ImGui::CalcTextSize("L00 ").x, line = ImGui::GetTextLineHeightWithSpacing();
    // The grids by head share the first row, half the width each; those by position take a row each.
    std::vector<const PatchGrid*> order;
    int rows_of_grids = 0;
    for (bool by_head : {true, false})
        for (const PatchGrid& grid : p.grids)
            if ((grid.kind == PatchKind::heads || grid.kind == PatchKind::pattern) == by_head) {
                rows_of_grids += !by_head || order.empty();
                order.push_back(&grid);
            }
    const float height = (ImGui::GetContentRegionAvail().y - 2 * line) / static_cast<float>(rows_of_grids) - line;
    for (size_t g = 0; g < order.size(); ++g) {
        const PatchGrid& grid = *order[g];
        const bool by_head = grid.kind == PatchKind::heads || grid.kind == PatchKind::pattern;
        const float room = (by_head ? width / 2 - spacing : width) - label_w;
        const float cell = std::floor(std::clamp(std::min(room / grid.cols, height / grid.rows), 4.f, 44 * ui.scale));
        if (grid.kind == PatchKind::pattern && g == 1) ImGui::SameLine(std::floor(width / 2 + spacing));
        ImGui::BeginGroup();
        const std::vector<float> values(grid.cells.begin(), grid.cells.end());
        const float scale = largest_magnitude(values);
        ImGui::Text("%s (up to %.3f)", patch_kind_choices.labels[static_cast<int>(grid.kind)], scale);
        const std::string name = std::string("patching-") + to_string(grid.kind);
        const auto [row, col] =
            signed_grid(ui, name.c_str(), values, grid.rows, grid.cols, by_head ? heads : positions, cell, scale);
        ImGui::EndGroup();
        if (row < 0 || !ui.tooltips) continue;
        const std::string what =
            by_head ? "H" + std::to_string(col)
                    : "position " + std::to_string(col) + " " + shown_token(s, state.selected, col, true);
        ImGui::SetTooltip("L%d %s: %+.4f %s", row, what.c_str(), grid.at(row, col), fraction_words(r.direction));
    }
    ImGui::TextDisabled("red: the patch %s the difference, 1 all of it; blue: the other way",
                        r.direction == PatchDirection::denoise ? "restores" : "destroys");
}

}  // namespace headscope
