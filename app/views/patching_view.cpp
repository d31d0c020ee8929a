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

// The ids a grid's positions are: an encoder–decoder's encoder's are its source's, else the text's (its target's).
const std::vector<int32_t>& grid_ids(const WindowState& state, const Session& s, const PatchGrid& grid) {
    const size_t b = static_cast<size_t>(state.selected);
    return grid.stack == PatchStack::encoder ? s.shown.source_ids.at(b) : s.shown.token_ids.at(b);
}

// Why an encoder–decoder's texts cannot be patched: sources of other lengths (core's check_patch_sources); "" else.
std::string sources_refusal(const WindowState& state, const Session& s) {
    if (!s.model().config.is_encoder_decoder()) return "";
    const size_t a = s.shown_ids(state.selected).source.size(), b = s.comparison().ids().source.size();
    if (a == b) return "";
    return "patching copies the encoder's activations position by position, so it needs sources of equal length: "
           "B's has " +
           std::to_string(b) + " tokens, the text's " + std::to_string(a);
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
    s.comparison().compute_patching(s.shown_ids(state.selected), s.comparison().ids(), patch_options(state.options),
                                    request, state.patch.method);
}

void PatchingView::draw(WindowState& state, Session& s, Ui& ui) {
    const Config& config = s.model().config;
    if (!config.predicts()) {
        ImGui::TextDisabled("patching measures the predictions, and this checkpoint has no output head");
        return;
    }
    Comparison& compare = s.comparison();
    const bool seq2seq = config.is_encoder_decoder();
    if (!s.same_lengths() || compare.attention().top_k == 0 || !sources_refusal(state, s).empty()) {
        const std::string line =
            compare.length() == 0
                ? std::string("type a compare text (B) beside the text: patching copies activations between the two")
            : !s.same_lengths()
                ? "patching copies activations position by position, so it needs equal lengths: B" +
                      std::string(seq2seq ? "'s target" : "") + " has " + std::to_string(compare.length()) +
                      " tokens, the text" + (seq2seq ? "'s target " : " ") + std::to_string(s.length(state.selected))
                : sources_refusal(state, s);
        text_wrapped(ui, {{"view", "patching-lengths"}, {"text", line}}, "%s", line.c_str());
        return;
    }
    ImGui::TextDisabled(seq2seq ? "clean: the text (A) and its target; corrupted: the compare source (B) and its target"
                                : "clean: the text (A); corrupted: the compare text (B)");
    if (seq2seq) {  // which stack's grids are shown (all are computed)
        int stack = static_cast<int>(state.patch.stack) - 1;
        ImGui::SameLine();
        if (enum_combo(ui, "grids shown", stack, shown_patch_stack_labels, std::floor(170 * ui.scale), "patch stack"))
            state.patch.stack = static_cast<PatchStack>(stack + 1);
    }
    metric_controls(state, s, ui);
    if (compare.patching_pending()) {
        if (!progress_bar(compare.patching_progress(), ui, "patching", std::floor(400 * ui.scale)))
            ImGui::TextDisabled("patching...");
    } else if (button(ui, compare.patching() ? "Patch again" : "Patch", "patch")) {
        compute(state, s);
    }
    if (!compare.patching_message.empty()) ImGui::TextColored(error_colour, "%s", compare.patching_message.c_str());
    if (compare.patched_run_pending()) ImGui::TextDisabled("computing the patched run...");
    if (compare.patching()) grids(state, s, ui);
}

std::string PatchingView::patched_run_label(const Session& s, const Comparison::PatchedRun& run) {
    const PatchCell& c = run.cell;
    // An encoder–decoder's cell names its stack; an encoder's positions are the source's tokens.
    const std::string stack = c.stack == PatchStack::own
                                  ? ""
                                  : std::string("the ") + patch_stack_choices.labels[static_cast<int>(c.stack)] + "'s ";
    const std::vector<int32_t>& ids = c.stack == PatchStack::encoder ? run.own.source : run.own.tokens;
    const std::string layer = stack + indexed('L', c.layer),
                      position = "position " + std::to_string(c.index) + " " + shown_token(s, ids, c.index, true);
    const std::string what = c.kind == PatchKind::heads     ? layer + " H" + std::to_string(c.index) + "'s output"
                             : c.kind == PatchKind::pattern ? layer + " H" + std::to_string(c.index) + "'s pattern"
                             : c.kind == PatchKind::mlp     ? layer + "'s MLP output at " + position
                                                        : "the residual stream entering " + layer + " at " + position;
    return run.direction == PatchDirection::denoise
               ? "the patched run: the corrupted text (B) with " + what + " from the clean text (A)"
               : "the patched run: the clean text (A) with " + what + " from the corrupted text (B)";
}

void PatchingView::patched_run_line(Session& s, Ui& ui, const Comparison::PatchedRun& run) {
    const std::string label = "Showing " + patched_run_label(s, run);
    if (button(ui, "Back to the text's own run", "patched-run-back")) s.comparison().stop_showing_patched_run();
    ImGui::SameLine();
    text_coloured(ui,
                  {{"view", "patched-run"},
                   {"kind", to_string(run.cell.kind)},
                   {"component", patch_grid_name(run.cell.kind, run.cell.stack)},
                   {"layer", run.cell.layer},
                   {"index", run.cell.index},
                   {"direction", to_string(run.direction)},
                   {"text", label}},
                  warning_colour, "%s", label.c_str());
}

void PatchingView::metric_controls(WindowState& state, Session& s, Ui& ui) {
    PatchChoices& patch = state.patch;
    enum_combo(ui, "method", patch.method, patch_method_choices.labels, std::floor(190 * ui.scale), "method");
    ImGui::SameLine();
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

void PatchingView::grids(const WindowState& state, Session& s, Ui& ui) {
    Comparison& compare = s.comparison();
    const Patching& p = *compare.patching();
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
    if (!compare.patching_current(s.shown_ids(state.selected), patch_options(state.options)))
        ImGui::TextColored(warning_colour, "computed for other texts or options: patch again");
    if (!compare.estimate_refusal().empty())
        text_coloured(ui, {{"view", "patch-estimate-refusal"}, {"text", compare.estimate_refusal()}}, warning_colour,
                      "%s", compare.estimate_refusal().c_str());
    // The grids by head first; with both methods each kind's exact grid and
    // its estimate share a row, on one scale; else the grids by head share
    // the first row, half the width each, and those by position take a row each.
    const Patching *exact = compare.exact(), *estimate = compare.estimate();
    std::vector<GridShown> shown;
    for (bool by_head : {true, false})
        for (size_t k = 0; k < p.grids.size(); ++k) {
            const PatchKind kind = p.grids[k].kind;
            if ((kind == PatchKind::heads || kind == PatchKind::pattern) != by_head) continue;
            if (p.grids[k].stack != PatchStack::own && p.grids[k].stack != state.patch.stack) continue;
            float scale = 0;
            for (const Patching* grids : {exact, estimate})
                if (grids) {
                    const std::vector<double>& cells = grids->grids[k].cells;
                    scale = std::max(scale, largest_magnitude(std::vector<float>(cells.begin(), cells.end())));
                }
            if (exact) shown.push_back({&exact->grids[k], estimate ? &estimate->grids[k] : nullptr, false, scale});
            if (estimate) shown.push_back({&estimate->grids[k], exact ? &exact->grids[k] : nullptr, true, scale});
        }
    const bool both = exact && estimate;
    int rows_of_grids = 0;
    for (size_t g = 0; g < shown.size(); ++g)
        rows_of_grids += !half_width(shown, g, both) || !beside_last(shown, g, both);
    const float width = ImGui::GetContentRegionAvail().x, spacing = ImGui::GetStyle().ItemSpacing.x;
    const float line = ImGui::GetTextLineHeightWithSpacing();
    // Each row of grids: a title, the column labels and the cells; the legend's two lines after the last.
    const float height = (ImGui::GetContentRegionAvail().y - 2 * line) / static_cast<float>(rows_of_grids) - 2 * line;
    for (size_t g = 0; g < shown.size(); ++g) {
        if (beside_last(shown, g, both)) ImGui::SameLine(std::floor(width / 2 + spacing));
        grid(state, s, ui, shown[g], half_width(shown, g, both) ? width / 2 - spacing : width, height);
    }
    if (shown.empty())
        ImGui::TextDisabled("no grid of these kinds in this stack (the cross-attention's: heads and patterns)");
    ImGui::TextDisabled(
        "red: the patch %s the difference, 1 all of it; blue: the other way.%s",
        r.direction == PatchDirection::denoise ? "restores" : "destroys",
        s.model().config.is_encoder_decoder() ? "" : " Click a cell: its patched run's maps and predictions");
}

bool PatchingView::half_width(const std::vector<GridShown>& shown, size_t g, bool both) {
    const PatchKind kind = shown[g].grid->kind;
    return both || kind == PatchKind::heads || kind == PatchKind::pattern;
}

// With both methods, an estimate goes beside its exact grid; else the patterns beside the heads.
bool PatchingView::beside_last(const std::vector<GridShown>& shown, size_t g, bool both) {
    if (g == 0 || !half_width(shown, g, both) || !half_width(shown, g - 1, both)) return false;
    return both ? shown[g].estimated : g == 1;
}

// One grid in `width`, its cells at most `height` in all: its title, its
// cells, the hover (beside the other method's value where both are shown)
// and a click, which computes the cell's patched run.
void PatchingView::grid(const WindowState& state, Session& s, Ui& ui, const GridShown& shown, float width,
                        float height) {
    const PatchGrid& g = *shown.grid;
    const Patching& p = *s.comparison().patching();
    const bool by_head = g.kind == PatchKind::heads || g.kind == PatchKind::pattern;
    const std::vector<int32_t>& ids = grid_ids(state, s, g);
    std::vector<std::string> labels;
    for (int c = 0; c < g.cols; ++c) labels.push_back(by_head ? indexed('H', c) : shown_token(s, ids, c));
    const float room = width - ImGui::CalcTextSize("L00 ").x;
    const float cell = std::floor(std::clamp(std::min(room / g.cols, height / g.rows), 4.f, 44 * ui.scale));
    ImGui::BeginGroup();
    const std::vector<float> values(g.cells.begin(), g.cells.end());
    const char* stack = g.stack == PatchStack::own ? "" : patch_stack_choices.labels[static_cast<int>(g.stack)];
    ImGui::Text("%s%s%s%s (up to %.3f)", stack, *stack ? "'s " : "",
                patch_kind_choices.labels[static_cast<int>(g.kind)], shown.estimated ? ", estimated" : "",
                largest_magnitude(values));
    const std::string name = "patching-" + patch_grid_name(g.kind, g.stack) + (shown.estimated ? "-estimate" : "");
    const auto [row, col] = signed_grid(ui, name.c_str(), values, g.rows, g.cols, labels, cell, shown.scale);
    if (row >= 0 && ImGui::IsItemClicked())
        s.comparison().compute_patched_run({g.kind, row, col, g.stack}, s.shown_options);
    ImGui::EndGroup();
    if (row < 0 || !ui.tooltips) return;
    const std::string what = std::string(stack) + (*stack ? " " : "") +
                             (by_head ? "H" + std::to_string(col)
                                      : "position " + std::to_string(col) + " " + shown_token(s, ids, col, true));
    const char* words = fraction_words(p.request.direction);
    const char* click = "\nclick: show its patched run";
    if (!shown.other) {
        ImGui::SetTooltip("L%d %s: %+.4f %s%s%s", row, what.c_str(), g.at(row, col), words,
                          shown.estimated ? " (estimated)" : "", click);
        return;
    }
    const PatchGrid& exact = shown.estimated ? *shown.other : g;
    const PatchGrid& estimate = shown.estimated ? g : *shown.other;
    ImGui::SetTooltip("L%d %s: exact %+.4f, estimate %+.4f %s%s", row, what.c_str(), exact.at(row, col),
                      estimate.at(row, col), words, click);
}

}  // namespace headscope
