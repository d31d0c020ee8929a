#include "views/checks_view.h"

#include <algorithm>
#include <cmath>

#include "headscope/inspect/strided.h"
#include "widgets/texts.h"

namespace headscope {

namespace {

std::string token_with_id(const Model& model, int32_t id) {
    return shown_token(model.tokenizer, id, true) + " (id " + std::to_string(id) + ")";
}

// A labelled number, the numbers of a section lined up; recorded for
// --layout as {"view": "checks", "figure": name, "value": value}.
void figure(Ui& ui, const char* name, const char* label, double value) {
    ImGui::TextUnformatted(label);
    ImGui::SameLine(ImGui::CalcTextSize("max |diff| of the attention weights").x + 3 * ImGui::GetFontSize());
    text(ui, {{"view", "checks"}, {"figure", name}, {"value", value}}, "%.3g", value);
}

void heading(const char* title) {
    ImGui::Spacing();
    ImGui::TextUnformatted(title);
    ImGui::Separator();
}

}  // namespace

void ChecksView::draw(const WindowState& state, const Session& session, Ui& ui) {
    const int b = state.selected;
    const FigureWorker<Key, Figures>::Outcome* figures = figures_.get({session.shown_generation, b}, [&] {
        progress_.start();
        return [this, model = session.shared_model(),
                batch = Batch{session.shown.token_ids, session.model().config.pad_id()},
                options = session.shown_options, b](std::stop_token stop) {
            const Progress progress = progress_.reporter(std::move(stop));
            const std::unique_ptr<Backend> backend = own_cpu_backend(*model);
            return Figures{compare_with_head_loop(*backend, *model, batch, options, progress),
                           check_causality(*backend, *model, batch, b, options, progress)};
        };
    });
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    ImGui::BeginChild("figures", ImVec2(std::floor(avail.x * 0.6f), 0));
    if (!figures) {
        if (!progress_bar(progress_, ui, "checks", 360 * ui.scale)) ImGui::TextUnformatted("computing...");
    } else if (!figures->error.empty() && progress_.cancelled()) {
        ImGui::TextUnformatted("The checks were cancelled.");
        ImGui::SameLine();
        if (ImGui::SmallButton("Run them")) figures_.forget();
    } else if (!figures->error.empty()) {
        ImGui::TextColored(error_colour, "The checks could not run: %s", figures->error.c_str());
    } else {
        loop_section(session, ui, figures->result);
        causality_section(session, ui, figures->result, b);
    }
    shapes_section(session, ui);
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
    const HeadLoopComparison& loop = figures.loop;
    // The weights are at most 1; the outputs' round-off scales with their size.
    const Agreement weights = agreement(loop.max_weight_diff, 1),
                    outputs = agreement(loop.max_output_diff, loop.max_output);
    if (weights == Agreement::exact && outputs == Agreement::exact)
        ImGui::TextColored(good_colour, "Exactly the same: the batched heads are %d independent heads.",
                           session.heads_shown());
    else if (weights != Agreement::differs && outputs != Agreement::differs)
        ImGui::TextColored(good_colour,
                           "The same up to float round-off (tolerance %.0e of the values' size): the batched heads "
                           "are %d independent heads.",
                           relative_round_off, session.heads_shown());
    else if (session.shown_options.split == Split::naive_view)
        ImGui::TextColored(warning_colour,
                           "They differ: the naive view mixes tokens' channels into \"heads\"; the loop "
                           "splits by columns, the correct split.");
    else
        ImGui::TextColored(error_colour,
                           "They differ by more than float round-off (tolerance %.0e of the values' size).",
                           relative_round_off);
}

void ChecksView::causality_section(const Session& session, Ui& ui, const Figures& figures, int b) {
    const CausalityCheck& check = figures.causality;
    heading("Causality: change the last token, compare the earlier rows");
    if (check.earlier_rows == 0) {
        ImGui::Text("Text %d has one token: there are no earlier rows to compare.", b + 1);
        return;
    }
    const Model& model = session.model();
    ImGui::TextWrapped(
        "Text %d, token %d: %s replaced by %s; its %d earlier query rows compared in every layer and head:", b + 1,
        check.position, token_with_id(model, check.token).c_str(), token_with_id(model, check.replacement).c_str(),
        check.earlier_rows);
    figure(ui, "earlier_rows_diff", "max |diff| of the earlier rows", check.max_earlier_diff);
    figure(ui, "changed_row_diff", "max |diff| of the changed row", check.max_changed_row_diff);
    // Weights are at most 1: the tolerance is relative_round_off itself.
    const Agreement earlier = agreement(check.max_earlier_diff, 1);
    const bool causal = session.shown_options.causal;
    if (earlier == Agreement::exact)
        ImGui::TextColored(causal ? good_colour : warning_colour, "%s",
                           causal ? "Causal mask on: the earlier rows are exactly unchanged; no token sees a later one."
                                  : "Causal mask off, and the earlier rows are exactly unchanged.");
    else if (earlier == Agreement::round_off)
        ImGui::TextColored(causal ? good_colour : warning_colour,
                           "Causal mask %s: the earlier rows are unchanged up to float round-off (max %.2g, "
                           "tolerance %.0e)%s",
                           causal ? "on" : "off", check.max_earlier_diff, relative_round_off,
                           causal ? "; no token sees a later one." : ".");
    else if (causal)
        ImGui::TextColored(error_colour,
                           "Causal mask on, yet the earlier rows changed by up to %.3g, beyond the float round-off "
                           "tolerance %.0e: the mask leaks.",
                           check.max_earlier_diff, relative_round_off);
    else
        ImGui::TextColored(warning_colour, "Causal mask off: the earlier rows changed; tokens see the future.");
}

void ChecksView::shapes_section(const Session& session, Ui& ui) {
    const AttentionResult& att = session.shown.attention;
    const Config& config = session.model().config;
    heading("Shapes of this compute");
    // hs is C / NH only where the query width is C (Qwen 3's heads are wider).
    const int width = att.NH * att.hs;
    std::string sizes = "B = " + std::to_string(att.B) + " texts   T = " + std::to_string(att.T) +
                        " tokens   C = " + std::to_string(config.n_embd) + "   NH = " + std::to_string(att.NH) +
                        " heads   ";
    if (att.NKV != att.NH)
        sizes += "NKV = " + std::to_string(att.NKV) + " key/value heads (groups of " +
                 std::to_string(att.NH / att.NKV) + ")   ";
    sizes += width == config.n_embd
                 ? "hs = C / NH = " + std::to_string(att.hs)
                 : "hs = " + std::to_string(att.hs) + " (NH x hs = " + std::to_string(width) + ", not C)";
    text_wrapped(ui, {{"view", "checks-config"}, {"name", "sizes"}, {"text", sizes}}, "%s", sizes.c_str());
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
        text_disabled(ui, {{"view", "checks-shape"}, {"name", row.name}, {"dims", row.dims}, {"shape", row.shape}},
                      "%s", row.what.c_str());
    }
    ImGui::EndTable();
}

void ChecksView::parameters_section(const Session& session, Ui& ui) {
    const Model& model = session.model();
    heading("The model");
    // The values wrap within the window: a mixture of experts' MLP row is a sentence.
    if (ImGui::BeginTable("config", 2, ImGuiTableFlags_RowBg)) {
        ImGui::TableSetupColumn("name", ImGuiTableColumnFlags_WidthFixed);
        ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch);
        for (const ConfigRow& row : config_table(model)) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::TextDisabled("%s", row.name.c_str());
            ImGui::TableNextColumn();
            text_wrapped(ui, {{"view", "checks-config"}, {"name", row.name}, {"text", row.value}}, "%s",
                         row.value.c_str());
        }
        ImGui::EndTable();
    }

    const std::vector<ParameterRow> rows = parameter_table(model);
    const int64_t total = model.params;  // what the rows add up to
    heading("Parameters of the model");
    text(ui, {{"view", "checks"}, {"figure", "parameters"}, {"value", total}},
         "%zu tensors, %lld parameters in all, whatever the head split", rows.size(), static_cast<long long>(total));
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
        text(ui, {{"view", "checks"}, {"figure", "tensor"}, {"name", row.name}, {"value", row.count}}, "%lld",
             static_cast<long long>(row.count));
    }
    ImGui::EndTable();
}

}  // namespace headscope
