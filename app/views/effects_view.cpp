// The effects tab: see effects_view.h.
#include "views/effects_view.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headscope/inspect/heatmap.h"
#include "widgets/controls.h"
#include "widgets/signed_grid.h"
#include "widgets/texts.h"

namespace headscope {

namespace {

// A cell side that fits `cols` cells (and the row labels) in `width` and `rows` in `height`.
float cell_side(int rows, int cols, float width, float height, const Ui& ui) {
    const float label_w = ImGui::CalcTextSize("L00 ").x;
    return std::floor(std::clamp(std::min((width - label_w) / cols, height / rows), 6 * ui.scale, 44 * ui.scale));
}

}  // namespace

void EffectsView::draw(WindowState& state, Session& s, Ui& ui) {
    const int T = s.length(state.selected);
    ImGui::SetNextItemWidth(std::floor(220 * ui.scale));
    int position = s.predicted_query();
    if (slider_int(ui, "position", &position, 0, T - 1, "position")) state.query = position;
    ImGui::SameLine();
    ImGui::Text("%s", shown_token(s, state.selected, s.predicted_query(), true).c_str());
    const float width = ImGui::GetContentRegionAvail().x, spacing = ImGui::GetStyle().ItemSpacing.x;
    const float half = std::floor((width - 2 * spacing) / 2);
    ImGui::BeginGroup();
    effects_grid(state, s, ui, half);
    ImGui::Spacing();
    rollout_map(state, s, ui, half);
    ImGui::EndGroup();
    ImGui::SameLine(0, 2 * spacing);
    ImGui::BeginGroup();
    attribution_grid(state, s, ui, half);
    ImGui::Spacing();
    head_writes_lists(state, s, ui);
    ImGui::EndGroup();
}

void EffectsView::effects_grid(WindowState& state, Session& s, Ui& ui, float width) {
    const Config& config = s.model().config;
    if (config.has_experts()) {  // a mixture's grid knocks out its heads or its experts
        enum_combo(ui, "##effects of", state.effects_of, effects_of_choices.labels, std::floor(110 * ui.scale),
                   "effects of");
        ImGui::SameLine();
    }
    const bool heads = s.effects_of() == EffectsOf::heads;
    ImGui::Text("Knock out each %s in turn: the change in loss", heads ? "head" : "expert");
    if (s.effects_pending()) {
        if (!progress_bar(s.effects_progress(), ui, "effects", width))
            ImGui::TextDisabled("knocking out %s...", to_string(s.effects_of()));
    } else {
        int layers = 0;
        for (int l = 0; l < config.n_layer; ++l) layers += heads || config.expert_layer(l);
        const int cells = layers * (heads ? s.heads_shown() : config.n_experts);
        if (button(ui, s.effects() ? "Compute again" : "Compute the effects grid", "compute effects"))
            s.compute_effects();
        ImGui::SameLine();
        checkbox(ui, "every cell exact", &state.effects_all_exact, "effects all exact");
        ImGui::SameLine();
        if (state.effects_all_exact)
            ImGui::TextDisabled("%d forwards from each %s's layer on", cells, heads ? "head" : "expert");
        else
            ImGui::TextDisabled("estimated at once, then the %d largest and %d others exact", hybrid_largest,
                                hybrid_others);
    }
    if (!s.effects_message.empty()) ImGui::TextColored(error_colour, "%s", s.effects_message.c_str());
    const HeadEffects* e = s.effects();
    if (!e) return;
    if (!s.effects_current())
        ImGui::TextColored(warning_colour,
                           "computed for another text, options, knock-outs, grid or method: compute again");
    const bool intact = e->already_out.empty() && e->experts_already_out.empty();
    const char* ablation = e->of == EffectsOf::experts     ? ""  // an expert is taken out of the router's choice
                           : e->ablation == Ablation::mean ? ", knocked out to their mean"
                                                           : ", knocked out to zero";
    ImGui::Text("loss %.3f nats (%s%s)", e->loss, intact ? "intact" : "with the heads and experts already out",
                ablation);
    std::vector<uint8_t> estimated;  // the cells marked
    if (e->method != EffectsMethod::exact) {
        for (uint8_t exact : e->exact) estimated.push_back(!exact);
        const auto count = std::count(estimated.begin(), estimated.end(), 0);
        ImGui::TextDisabled("%d of %d cells exact; the corner-marked ones are estimated", static_cast<int>(count),
                            e->L * e->N);
    }
    if (!e->fallback.empty()) ImGui::TextDisabled("%s", e->fallback.c_str());
    const char unit = e->of == EffectsOf::heads ? 'H' : 'E';
    std::vector<std::string> labels;
    for (int i = 0; i < e->N; ++i) labels.push_back(indexed(unit, i));
    const float scale = largest_magnitude(e->loss_change);
    const float cell =
        cell_side(e->L, e->N, width, ImGui::GetContentRegionAvail().y - 4 * ImGui::GetTextLineHeight(), ui);
    const auto [l, i] = signed_grid(ui, "effects-grid", e->loss_change, e->L, e->N, labels, cell, scale, estimated);
    ImGui::TextDisabled("blue: the loss falls without the %s; red: it rises (up to %+.3f nats)",
                        unit == 'H' ? "head" : "expert", scale);
    if (l < 0) return;
    // A grid of other options may have other heads: only a current one selects.
    const bool selectable = s.effects_current() && l < static_cast<int>(s.shown.attention.layers.size()) &&
                            (unit == 'E' || i < s.heads_shown());
    if (selectable && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
        state.layer = l;
        if (unit == 'H') state.head = i;
    }
    if (ui.tooltips) effects_tooltip(s, *e, l, i, selectable);
}

// What cell (l, i) of the grid is: its knock-out's change in loss and in the
// top token's p at the predicted position, or why it has none.
void EffectsView::effects_tooltip(const Session& s, const HeadEffects& e, int l, int i, bool selectable) {
    const char unit = e.of == EffectsOf::heads ? 'H' : 'E';
    if (std::isnan(e.loss_change_at(l, i))) {
        const Config& config = s.model().config;
        const auto& out = e.experts_already_out;
        if (unit == 'E' && !config.expert_layer(l))
            ImGui::SetTooltip("L%d's MLP is dense, without experts", l);
        else if (unit == 'H' || std::binary_search(out.begin(), out.end(), ExpertRef{l, i}))
            ImGui::SetTooltip("L%d %c%d was already knocked out", l, unit, i);
        else
            ImGui::SetTooltip("knocking out L%d E%d too would leave fewer than the %d experts each token takes", l, i,
                              config.experts_per_token);
        return;
    }
    ImGui::BeginTooltip();
    if (!e.exact_at(l, i)) {
        ImGui::Text("L%d %c%d knocked out: loss %+.4f nats, estimated", l, unit, i, e.loss_change_at(l, i));
        ImGui::TextDisabled("(knocked-out - actual output) . the loss's gradient; not run exactly");
    } else {
        ImGui::Text("L%d %c%d knocked out: loss %+.4f nats, exact", l, unit, i, e.loss_change_at(l, i));
        if (!e.estimate.empty()) ImGui::TextDisabled("estimated %+.4f nats", e.estimate[size_t(l) * e.N + i]);
        const int t = std::min(s.predicted_query(), e.T - 1);
        const Prediction& top = e.top[t];
        ImGui::Text("at position %d the top token %s: p %.4f -> %.4f", t,
                    shown_token(s.model().tokenizer, top.id, true).c_str(), top.p, top.p + e.top_p_change_at(l, i, t));
    }
    if (selectable) ImGui::TextDisabled(unit == 'H' ? "click: select the head" : "click: select the layer");
    ImGui::EndTooltip();
}

void EffectsView::attribution_grid(WindowState& state, const Session& s, Ui& ui, float width) {
    const AttentionResult& att = s.shown.attention;
    const int b = state.selected, t = s.predicted_query();
    if (att.head_logit_attribution.empty()) {
        const std::string refusal = s.replaying()
                                        ? "a generation's steps compute no contributions: any change computes "
                                          "them again"
                                        : s.contributions_refusal();
        ImGui::TextDisabled("%s", refusal.empty() ? "computing what each head contributes..." : refusal.c_str());
        return;
    }
    const int L = att.L, NH = att.NH, T = att.T;
    const int32_t token = att.predictions_at(b, t)[0].id;
    const size_t at = static_cast<size_t>(b) * T + t;
    ImGui::Text("Direct logit attribution of %s (logit %.2f)", shown_token(s.model().tokenizer, token, true).c_str(),
                att.attributed_logit[at]);
    // Each layer's heads, then its MLP and its output projection's bias.
    std::vector<float> values;
    for (int l = 0; l < L; ++l) {
        for (int h = 0; h < NH; ++h)
            values.push_back(att.head_logit_attribution[((size_t(l) * att.B + b) * NH + h) * T + t]);
        const float* parts = &att.part_logit_attribution[at * att.parts()];
        values.push_back(parts[1 + L + l]);
        values.push_back(parts[1 + l]);
    }
    std::vector<std::string> labels;
    for (int h = 0; h < NH; ++h) labels.push_back(indexed('H', h));
    labels.push_back("MLP");
    labels.push_back("bias");
    const float scale = largest_magnitude(values);
    const float cell = cell_side(L, NH + 2, width, ImGui::GetContentRegionAvail().y * 0.6f, ui);
    const auto [l, c] = signed_grid(ui, "attribution-grid", values, L, NH + 2, labels, cell, scale);
    const float* parts = &att.part_logit_attribution[at * att.parts()];
    ImGui::TextDisabled("embeddings %+.3f, final norm's shift %+.3f; red raises the logit (up to %.3f)", parts[0],
                        parts[2 * L + 1], scale);
    if (l < 0) return;
    if (c < NH && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) state.layer = l, state.head = c;
    if (ui.tooltips)
        ImGui::SetTooltip("L%d %s: %+.4f of the logit", l, labels[c].c_str(),
                          values[static_cast<size_t>(l) * (NH + 2) + c]);
}

// Abnar and Zuidema's rollout of the selected text, through the colormap:
// row q, how much position q's last residual stream draws on each token.
void EffectsView::rollout_map(const WindowState& state, const Session& s, Ui& ui, float width) {
    const AttentionResult& att = s.shown.attention;
    if (att.rollout.empty()) return;
    ImGui::TextUnformatted("Rollout over every layer (Abnar & Zuidema)");
    const float side = std::floor(std::min(width, ImGui::GetContentRegionAvail().y - 4));
    if (side < 16) return;
    const int b = state.selected, T = att.T;
    const int pixels = std::max(1, static_cast<int>(side * ImGui::GetIO().DisplayFramebufferScale.x));
    const RolloutKey key{s.shown_generation, b, pixels, ui.colormap};
    if (!(key == rollout_key_)) {
        ui.renderer.upload(rollout_image(att, s.shown_options, b, s.length(b), pixels), rollout_texture_);
        ui.renderer.draw(ui.colormap, pixels, pixels, rollout_texture_);
        rollout_key_ = key;
    }
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    image_grid(ui, {{"view", "rollout"}, {"row", "query"}, {"col", "key"}}, rollout_texture_, ImVec2(side, side), T, T);
    const float cell = side / T;
    if (!ui.tooltips || !ImGui::IsItemHovered()) return;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const int q = std::clamp(static_cast<int>((mouse.y - origin.y) / cell), 0, T - 1);
    const int k = std::clamp(static_cast<int>((mouse.x - origin.x) / cell), 0, T - 1);
    ImGui::SetTooltip("position %d %s draws %.4f on token %d %s", q, shown_token(s, b, q, true).c_str(),
                      att.rollout[(static_cast<size_t>(b) * T + q) * T + k], k, shown_token(s, b, k, true).c_str());
}

void EffectsView::head_writes_lists(const WindowState& state, const Session& s, Ui& ui) {
    const AttentionResult& att = s.shown.attention;
    if (att.final_scale.empty() || att.outputs.empty()) return;
    const int t = s.predicted_query();
    const WritesKey key{s.shown_generation, state.selected, state.layer, state.head, t};
    if (!(key == writes_key_)) {
        writes_ = head_writes(s.model(), att, state.layer, state.selected, state.head, t);
        writes_key_ = key;
    }
    const HeadWrites& writes = writes_;
    ImGui::Text("What L%d H%d writes at position %d", state.layer, state.head, t);
    const Tokenizer& tokenizer = s.model().tokenizer;
    if (!ImGui::BeginTable("writes", 2, ImGuiTableFlags_SizingStretchSame)) return;
    ImGui::TableSetupColumn("promoted");
    ImGui::TableSetupColumn("suppressed");
    ImGui::TableHeadersRow();
    for (size_t r = 0; r < writes.promoted.size(); ++r) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        text(ui, {{"view", "promoted"}, {"rank", r + 1}, {"id", writes.promoted[r].id}}, "%+7.3f  %s",
             writes.promoted[r].logit, shown_token(tokenizer, writes.promoted[r].id, true).c_str());
        ImGui::TableNextColumn();
        text(ui, {{"view", "suppressed"}, {"rank", r + 1}, {"id", writes.suppressed[r].id}}, "%+7.3f  %s",
             writes.suppressed[r].logit, shown_token(tokenizer, writes.suppressed[r].id, true).c_str());
    }
    ImGui::EndTable();
}

}  // namespace headscope
