// The predictions panel: see predictions_view.h.
#include "views/predictions_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "views/patching_view.h"
#include "widgets/texts.h"

namespace headscope {

namespace {

// With heads or experts knocked out: the intact model's top tokens at row t
// beside their p with them out, and the loss with and without them.
void intact_comparison(const WindowState& state, const Session& s, Ui& ui, int t) {
    const AttentionResult &out = s.shown.attention, &intact = s.intact;
    const int b = state.selected;
    ImGui::Spacing();
    ImGui::TextColored(warning_colour, "%zu knocked out: the intact model's top 5",
                       s.shown_options.ablate.size() + s.shown_options.ablate_experts.size());
    if (!ImGui::BeginTable("intact", 3, ImGuiTableFlags_SizingStretchProp)) return;
    ImGui::TableSetupColumn("intact");
    ImGui::TableSetupColumn("p");
    ImGui::TableSetupColumn("p out");
    ImGui::TableHeadersRow();
    const Prediction* top = intact.predictions_at(b, t);
    const Prediction* knocked = out.predictions_at(b, t);
    for (int k = 0; k < std::min(5, intact.top_k) && top[k].id >= 0; ++k) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(shown_token(s.model().tokenizer, top[k].id, true).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", top[k].p);
        ImGui::TableNextColumn();
        const Prediction* same =
            std::find_if(knocked, knocked + out.top_k, [&](const Prediction& p) { return p.id == top[k].id; });
        const nlohmann::ordered_json fields = {
            {"view", "intact-prediction"}, {"rank", k + 1}, {"id", top[k].id}, {"p", top[k].p}};
        if (same != knocked + out.top_k)
            text(ui, fields, "%.4f", same->p);
        else
            text(ui, fields, "< %.4f", knocked[out.top_k - 1].p);  // below the knocked-out model's top k
    }
    ImGui::EndTable();
    if (s.length(b) > 1)
        ImGui::Text("loss %.3f intact, %.3f out (%+.3f)", intact.loss(b), out.loss(b), out.loss(b) - intact.loss(b));
}

// With a compare text (B): both texts' top 5 at row t side by side; of
// another length, a line that says what needs equal lengths.
void compare_predictions(const WindowState& state, const Session& s, Ui& ui, int t) {
    const Comparison& compare = s.comparison();
    const AttentionResult &a = s.shown.attention, &b = compare.attention();
    ImGui::Spacing();
    if (!s.same_lengths()) {
        const std::string line = "B has " + std::to_string(compare.length()) + " tokens, the text " +
                                 std::to_string(s.length(state.selected)) +
                                 ": the diff view and patching need equal lengths";
        text_wrapped(ui, {{"view", "compare-lengths"}, {"text", line}}, "%s", line.c_str());
    }
    // A's last row goes with B's; another row with B's same one, or B's last where B is shorter.
    const int t_b = t == s.length(state.selected) - 1 ? compare.length() - 1 : std::min(t, compare.length() - 1);
    ImGui::TextColored(warning_colour, "the text (A) at %d, the compare text (B) at %d", t, t_b);
    if (!ImGui::BeginTable("compare", 4, ImGuiTableFlags_SizingStretchProp)) return;
    for (const char* column : {"A", "p", "B", "p "}) ImGui::TableSetupColumn(column);
    ImGui::TableHeadersRow();
    const Prediction* top_a = a.predictions_at(state.selected, t);
    const Prediction* top_b = b.predictions_at(0, t_b);
    const Tokenizer& tokenizer = s.model().tokenizer;
    for (int k = 0; k < std::min({5, a.top_k, b.top_k}); ++k) {
        ImGui::TableNextRow();
        for (const Prediction* p : {&top_a[k], &top_b[k]}) {
            ImGui::TableNextColumn();
            const char* which = p == &top_a[k] ? "A" : "B";
            text(ui, {{"view", "compare-prediction"}, {"text", which}, {"rank", k + 1}, {"id", p->id}, {"p", p->p}},
                 "%s", shown_token(tokenizer, p->id, true).c_str());
            ImGui::TableNextColumn();
            ImGui::Text("%.4f", p->p);
        }
    }
    ImGui::EndTable();
}

// A patched run shown (Comparison::PatchedRun): its top 5 at row t, beside the text's.
void patched_predictions(const WindowState& state, const Session& s, Ui& ui, int t, const Comparison::PatchedRun& run) {
    ImGui::Spacing();
    const std::string label = PatchingView::patched_run_label(s, run);
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(warning_colour, "%s, at %d", label.c_str(), t);
    ImGui::PopTextWrapPos();
    if (!ImGui::BeginTable("patched", 4, ImGuiTableFlags_SizingStretchProp)) return;
    for (const char* column : {"patched", "p", "A", "p "}) ImGui::TableSetupColumn(column);
    ImGui::TableHeadersRow();
    const AttentionResult& a = s.shown.attention;
    const Prediction *top = run.result.predictions_at(0, t), *top_a = a.predictions_at(state.selected, t);
    const Tokenizer& tokenizer = s.model().tokenizer;
    for (int k = 0; k < std::min({5, run.result.top_k, a.top_k}); ++k) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        text(ui, {{"view", "patched-prediction"}, {"rank", k + 1}, {"id", top[k].id}, {"p", top[k].p}}, "%s",
             shown_token(tokenizer, top[k].id, true).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", top[k].p);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(shown_token(tokenizer, top_a[k].id, true).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", top_a[k].p);
    }
    ImGui::EndTable();
}

// An encoder's fill of every mask token of the selected text: its top 3.
void masked_fills(const WindowState& state, const Session& s, Ui& ui) {
    const std::vector<int> masks = s.mask_positions(state.selected);
    if (masks.empty()) {
        ImGui::TextDisabled("type [MASK] (or <mask>) where a word should be filled");
        return;
    }
    const AttentionResult& att = s.shown.attention;
    for (int t : masks) {
        std::string fills;
        const Prediction* top = att.predictions_at(state.selected, t);
        for (int k = 0; k < std::min(3, att.top_k) && top[k].id >= 0; ++k) {
            char p[16];
            std::snprintf(p, sizeof p, " %.2f", top[k].p);
            fills += (k ? ", " : "") + shown_token(s.model().tokenizer, top[k].id, true) + p;
        }
        text_wrapped(ui, {{"view", "mask-fill"}, {"position", t}, {"id", top[0].id}}, "mask at %d: %s", t,
                     fills.c_str());
    }
}

}  // namespace

void predictions_panel(const WindowState& state, const Session& s, Ui& ui) {
    const AttentionResult& att = s.shown.attention;
    if (att.top_k == 0) {  // before the first compute, or a bare encoder's
        ImGui::TextWrapped("%s", s.model().config.predicts() ? "computing the predictions..." : no_head_message);
        return;
    }
    const int b = state.selected, t = s.predicted_query(), length = s.length(b);
    const Tokenizer& tokenizer = s.model().tokenizer;
    const bool encoder = s.model().config.is_encoder();  // it fills position t itself
    text(ui, {{"view", "prediction-query"}, {"query", t}}, "%s %s (token %d)", encoder ? "Filling" : "After",
         shown_token(s, state.selected, t, true).c_str(), t);
    if (state.hovered_query >= 0)
        ImGui::TextDisabled("the row under the mouse");
    else if (s.replaying())
        ImGui::TextDisabled("generation step %d of %zu", s.generation->step, s.generation->steps.size());
    else
        ImGui::TextDisabled("%s", state.query >= 0 ? "the row clicked"
                                  : encoder        ? "the first mask, else the last token (hover or click a row)"
                                                   : "the last token (hover or click a row)");
    ImGui::Spacing();

    // The token the text has where the predictions are: the next one, or an encoder's own.
    const int32_t next = encoder ? s.shown.token_ids[b][t] : t + 1 < length ? s.shown.token_ids[b][t + 1] : -1;
    const float line = ImGui::GetTextLineHeight();
    const float token_w = std::floor(110 * ui.scale), track_w = std::floor(100 * ui.scale);
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const Prediction* top = att.predictions_at(b, t);
    int next_rank = 0;  // 1-based; 0: not in the top
    for (int k = 0; k < att.top_k; ++k) {
        const Prediction& p = top[k];
        if (p.id < 0) break;
        if (p.id == next) next_rank = k + 1;
        // Whole pixels, so that a bar's filled length is exactly p of its track.
        const ImVec2 at(std::floor(ImGui::GetCursorScreenPos().x), std::floor(ImGui::GetCursorScreenPos().y));
        const std::string token = shown_token(tokenizer, p.id, true);
        const ImU32 colour = ImGui::GetColorU32(p.id == next ? good_colour : ImGui::GetStyleColorVec4(ImGuiCol_Text));
        draw->AddText(at, colour, ellipsized(token, line, token_w - 4).c_str());
        if (ui.tooltips && ImGui::IsMouseHoveringRect(at, ImVec2(at.x + token_w, at.y + line)))
            ImGui::SetTooltip("%s (id %d)", token.c_str(), p.id);
        const ImVec2 track(at.x + token_w, at.y + 2), track_size(track_w, std::floor(line) - 3);
        bar(ui, {{"view", "prediction"}, {"rank", k + 1}, {"id", p.id}, {"token", token}, {"p", p.p}}, draw, track,
            track_size, p.p, prediction_track_colour, prediction_bar_colour);
        ImGui::Dummy(ImVec2(token_w + track_w, line));
        ImGui::SameLine();
        ImGui::Text("%.4f", p.p);
    }

    ImGui::Spacing();
    const bool compared = s.comparison().length() > 0 && s.comparison().attention().top_k > 0;
    if (encoder) {
        masked_fills(state, s, ui);
        if (compared) compare_predictions(state, s, ui, t);
        return;
    }
    if (next < 0) {
        ImGui::TextDisabled("the text ends here");
    } else {
        const float p_next = std::exp(att.logprob_next[static_cast<size_t>(b) * att.T + t]);
        const std::string token = shown_token(tokenizer, next, true);
        const nlohmann::ordered_json fields = {
            {"view", "prediction-next"}, {"id", next}, {"rank", next_rank}, {"p", p_next}};
        if (next_rank)
            text(ui, fields, "next in the text %s: rank %d, p %.4f", token.c_str(), next_rank, p_next);
        else
            text(ui, fields, "next in the text %s: not in top %d, p %.2g", token.c_str(), att.top_k, p_next);
    }
    if (length > 1) ImGui::TextDisabled("loss %.3f nats per token", att.loss(b));
    if (s.intact.top_k > 0) intact_comparison(state, s, ui, t);
    if (const Comparison::PatchedRun* run = s.patched_run_shown()) patched_predictions(state, s, ui, t, *run);
    if (compared) compare_predictions(state, s, ui, t);
}

}  // namespace headscope
