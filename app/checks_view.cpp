#include "checks_view.h"

#include <algorithm>
#include <cmath>

#include "headscope/strided.h"

namespace headscope {

namespace {

// Below this (relative to the values, at least 1) the batched and looped
// results differ only by float round-off (summation order); a real
// difference (a wrong split or mask) is far larger.
constexpr double round_off = 1e-4;

std::string token_with_id(const Model& model, int32_t id) {
    std::string text = "'";
    text += visible_token(model.tokenizer, id);
    text += "' (id ";
    text += std::to_string(id);
    return text += ")";
}

// A labelled number, the numbers of a section lined up; recorded for
// --layout as {"view": "checks", "figure": name, "value": value}.
void figure(Ui& ui, const char* name, const char* label, double value) {
    ImGui::TextUnformatted(label);
    ImGui::SameLine(ImGui::CalcTextSize("max |diff| of the attention weights").x + 3 * ImGui::GetFontSize());
    ImGui::Text("%.3g", value);
    if (ui.layout.on())
        ui.layout.add({{"view", "checks"}, {"figure", name}, {"value", value}}, ImGui::GetItemRectMin(),
                      ImGui::GetItemRectSize());
}

void heading(const char* title) {
    ImGui::Spacing();
    ImGui::TextUnformatted(title);
    ImGui::Separator();
}

}  // namespace

bool ChecksView::figures_current(const Session& session) const {
    return figures_ && figures_->generation == session.shown_generation && figures_->b == session.selected;
}

void ChecksView::update(Session& session) {
    if (std::optional<Figures> done = worker_.take()) figures_ = std::move(done);
    if (worker_.running() || figures_current(session) || session.shown.token_ids.empty()) return;
    Figures figures;
    figures.generation = session.shown_generation;
    figures.b = session.selected;
    worker_.start(session, std::move(figures),
                  [batch = Batch{session.shown.token_ids, session.model().config.eos_token_id},
                   options = session.shown_options](Backend& backend, const Model& model, Figures& figures) {
                      figures.loop = compare_with_head_loop(backend, model, batch, options);
                      figures.causality = check_causality(backend, model, batch, figures.b, options);
                  });
}

void ChecksView::draw(Session& session, Ui& ui) {
    update(session);
    const bool current = figures_current(session);
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    ImGui::BeginChild("figures", ImVec2(std::floor(avail.x * 0.6f), 0));
    if (!current)
        ImGui::TextUnformatted("computing...");
    else if (!figures_->error.empty())
        ImGui::TextColored(error_colour, "The checks could not run: %s", figures_->error.c_str());
    else {
        loop_section(session, ui, *figures_);
        causality_section(session, ui, *figures_);
    }
    shapes_section(session);
    ImGui::EndChild();
    ImGui::SameLine(0, 12 * ui.scale);
    ImGui::BeginChild("parameters");
    parameters_section(session, ui);
    ImGui::EndChild();
}

void ChecksView::loop_section(const Session& session, Ui& ui, const Figures& figures) {
    heading("Batched heads vs a per-head loop");
    ImGui::TextWrapped(
        "The engine runs every head at once. Core's plain loop runs the same model one head at a time: it slices "
        "the head's q, k and v columns out of the fused projection, then scores, mask, softmax, weights times v. "
        "Every layer, all %d texts:",
        session.shown.attention.B);
    figure(ui, "weight_diff", "max |diff| of the attention weights", figures.loop.max_weight_diff);
    figure(ui, "output_diff", "max |diff| of the head outputs", figures.loop.max_output_diff);
    if (figures.loop.max_weight_diff < round_off &&
        figures.loop.max_output_diff < round_off * std::max(1.0, figures.loop.max_output))
        ImGui::TextColored(good_colour, "The same up to float round-off: the batched heads are %d independent heads.",
                           session.heads_shown());
    else if (session.shown_options.split == Split::naive_view)
        ImGui::TextColored(warning_colour,
                           "They differ: the naive view mixes tokens' channels into \"heads\"; the loop "
                           "splits by columns, the correct split.");
    else
        ImGui::TextColored(error_colour, "They differ by more than round-off.");
}

void ChecksView::causality_section(const Session& session, Ui& ui, const Figures& figures) {
    const CausalityCheck& check = figures.causality;
    heading("Causality: change the last token, compare the earlier rows");
    if (check.earlier_rows == 0) {
        ImGui::Text("Text %d has one token: there are no earlier rows to compare.", figures.b + 1);
        return;
    }
    const Model& model = session.model();
    ImGui::TextWrapped(
        "Text %d, token %d: %s replaced by %s; its %d earlier query rows compared in every layer and head:",
        figures.b + 1, check.position, token_with_id(model, check.token).c_str(),
        token_with_id(model, check.replacement).c_str(), check.earlier_rows);
    figure(ui, "earlier_rows_diff", "max |diff| of the earlier rows", check.max_earlier_diff);
    figure(ui, "changed_row_diff", "max |diff| of the changed row", check.max_changed_row_diff);
    const bool unchanged = check.max_earlier_diff == 0;
    if (session.shown_options.causal)
        ImGui::TextColored(unchanged ? good_colour : error_colour, "%s",
                           unchanged
                               ? "Causal mask on: the earlier rows are exactly unchanged; no token sees a later one."
                               : "Causal mask on, yet the earlier rows changed: the mask leaks.");
    else
        ImGui::TextColored(warning_colour, "%s",
                           unchanged ? "Causal mask off, and the earlier rows did not change."
                                     : "Causal mask off: the earlier rows changed; tokens see the future.");
}

void ChecksView::shapes_section(const Session& session) {
    const AttentionResult& att = session.shown.attention;
    const Config& config = session.model().config;
    heading("Shapes of this compute");
    ImGui::Text("B = %d texts   T = %d tokens   C = %d   NH = %d heads   hs = C / NH = %d", att.B, att.T, config.n_embd,
                att.NH, att.hs);
    if (!ImGui::BeginTable("shapes", 4,
                           ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit))
        return;
    for (const char* column : {"tensor", "dims", "shape", ""}) ImGui::TableSetupColumn(column);
    ImGui::TableHeadersRow();
    for (const ShapeRow& row : compute_shapes(config, att.B, att.T, att.NH)) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(row.name.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(row.dims.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(shape_string(row.shape).c_str());
        ImGui::TableNextColumn();
        ImGui::TextDisabled("%s", row.what.c_str());
    }
    ImGui::EndTable();
}

void ChecksView::parameters_section(const Session& session, Ui& ui) {
    const Model& model = session.model();
    const std::vector<ParameterRow> rows = parameter_table(model);
    int64_t total = 0;
    for (const ParameterRow& row : rows) total += row.count;
    heading("Parameters of the model");
    ImGui::Text("%zu tensors, %lld parameters in all, whatever the head split", rows.size(),
                static_cast<long long>(total));
    if (ui.layout.on())
        ui.layout.add({{"view", "checks"}, {"figure", "parameters"}, {"value", total}}, ImGui::GetItemRectMin(),
                      ImGui::GetItemRectSize());
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY;
    if (!ImGui::BeginTable("parameters", 3, flags)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("tensor", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("shape", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("count", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableHeadersRow();
    for (const ParameterRow& row : rows) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(row.name.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(shape_string(row.shape).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%lld", static_cast<long long>(row.count));
        if (ui.layout.on())
            ui.layout.add({{"view", "checks"}, {"figure", "tensor"}, {"name", row.name}, {"value", row.count}},
                          ImGui::GetItemRectMin(), ImGui::GetItemRectSize());
    }
    ImGui::EndTable();
}

}  // namespace headscope
