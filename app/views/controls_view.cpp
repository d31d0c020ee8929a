// The controls above the views: see controls_view.h.
#include "views/controls_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "headscope/base/error.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/prefix_cache.h"
#include "widgets/controls.h"
#include "widgets/texts.h"

namespace headscope {

namespace {

// Says plainly when the maps are not the model's own computation.
void differences_note(const WindowState& state, const Session& s, Ui& ui) {
    const Config& config = s.model().config;
    const HeadSplit own = head_split(config, 0);
    std::string note;
    // A count the model refuses is named in red by the session instead.
    if (state.options.n_head && state.options.n_head != own.NH && accepts_head_count(config, state.options.n_head)) {
        const HeadSplit now = head_split(config, state.options.n_head);
        note += "re-split into " + std::to_string(now.NH) + " heads of " + std::to_string(now.hs) +
                " (the model was trained with " + std::to_string(own.NH) + " of " + std::to_string(own.hs);
        if (own.group() > 1) note += ", " + std::to_string(own.group()) + " per key/value head: groups kept";
        note += ")";
        if (config.positions == Positions::rotary)
            note += "; RoPE now rotates at head size " + std::to_string(now.hs) + " (" +
                    std::to_string(rope_dims(config.rope, now.hs)) + " dims), not " + std::to_string(own.hs);
        note += "; ";
    }
    if (state.options.scale != own_scale(config.scaled_scores)) {
        if (state.options.scale == Scale::model) note += "scaled by 1/sqrt(C), the classic mistake; ";
        if (state.options.scale == Scale::none) note += "not scaled at all; ";
        if (state.options.scale == Scale::head) note += "scaled by 1/sqrt(d_head), which T5 folded into its weights; ";
    }
    if (state.options.split == Split::naive_view) note += "naive view: heads mix different tokens' channels; ";
    if (!state.options.causal && config.causal) note += "causal mask off: tokens see the future, unlike in training; ";
    if (state.options.causal && !config.causal)
        note += "causal mask on: this encoder was trained with every token seeing every other; ";
    if (config.sliding_window && !state.sliding_window_on)
        note += "sliding window off: queries see keys more than " + std::to_string(config.sliding_window) +
                " tokens back, unlike the model; ";
    if (note.empty()) return;
    note.resize(note.size() - 2);
    text_coloured(ui, {{"view", "differences-note"}, {"text", note}}, warning_colour,
                  "Not the model's own attention: %s.", note.c_str());
}

// An encoder's second text (B) of the selected text's sentence pair, where a
// decoder has its generation controls: an encoder fills masks, it does not generate.
bool pair_box(WindowState& state, Session& s, Ui& ui) {
    state.text_pairs.resize(state.texts.size());
    ImGui::BeginGroup();
    ImGui::TextDisabled("second text of a pair (B), as [CLS] A [SEP] B [SEP]:");
    ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x);
    const bool changed = text_input(ui, "##pair", "none: one text", &state.text_pairs[state.selected], "text pair");
    ImGui::TextDisabled("%s", s.model().config.predicts() ? "an encoder fills [MASK] tokens; it does not generate"
                                                          : "a bare encoder (no masked-LM head): maps only");
    compare_box(state, s, ui);
    ImGui::EndGroup();
    return changed;
}

// An encoder–decoder's target for the selected text (what the decoder has
// produced so far; the text box holds the source), and its greedy step.
bool target_box(WindowState& state, Session& s, Ui& ui) {
    state.targets.resize(state.texts.size());
    ImGui::BeginGroup();
    ImGui::TextDisabled("target: the decoder's input after its start token (the text is the source)");
    ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - 110 * ui.scale);
    const bool changed =
        text_input(ui, "##target", "none: the start token alone", &state.targets[state.selected], "target");
    ImGui::SameLine();
    if (button(ui, "next token", "next token"))
        if (std::string why = s.extend_target(); !why.empty()) s.message = why;
    if (ui.tooltips && ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "append the decoder's most likely next token to the target: its cross-attention row is the "
            "last row of the cross maps");
    if (enum_combo(ui, "attention", state.attention_kind, attention_kind_choices.labels, 220 * ui.scale,
                   "attention kind") &&
        s.computed())
        state.layer =
            std::min(state.layer, s.maps().layers() - 1);  // an encoder may have fewer layers than its decoder
    compare_box(state, s, ui);
    ImGui::EndGroup();
    return changed;
}

}  // namespace

ControlsView::ControlsView() {
    try {
        examples_ = read_examples(examples_file());
    } catch (const Error& e) {  // the menu says so; the window works without it
        examples_error_ = e.what();
        std::fprintf(stderr, "headscope: warning: %s\n", e.what());
    }
}

void ControlsView::draw(WindowState& state, Session& s, Ui& ui) {
    const Model& model = s.model();
    bool changed = false;
    model_bar(s, ui);
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted(
        state.texts.size() > 1 ? ("Text " + std::to_string(state.selected + 1) + " of the batch").c_str() : "Text");
    ImGui::SameLine();
    examples_menu(state, s, ui);
    const float generation_w = std::floor(560 * ui.scale);
    changed |= text_box(state, s, ui, std::max(100 * ui.scale, ImGui::GetContentRegionAvail().x - generation_w));
    ImGui::SameLine();
    if (model.config.is_encoder())
        changed |= pair_box(state, s, ui);
    else if (model.config.is_encoder_decoder())
        changed |= target_box(state, s, ui);
    else
        generation_controls(state, s, ui);
    changed |= checkbox(ui, "causal mask", &state.options.causal, "causal mask");
    ImGui::SameLine();
    changed |= checkbox(ui, "padding mask", &state.options.padding_mask);
    ImGui::SameLine();
    if (model.config.sliding_window) {  // only a model that has one
        const std::string label = "sliding window (" + std::to_string(model.config.sliding_window) + ")";
        changed |= checkbox(ui, label.c_str(), &state.sliding_window_on, "sliding window");
        ImGui::SameLine();
    }
    // The layers of the maps shown: an encoder–decoder's encoder may have another count.
    const int layers = !s.computed() ? model.config.n_layer : s.maps().layers();
    ImGui::SetNextItemWidth(120 * ui.scale);
    slider_int(ui, "layer", &state.layer, 0, layers - 1);
    ImGui::SameLine();
    if (model.config.mixed_windows()) {  // ModernBERT's, Gemma's: whether the shown layer has the window
        const bool local = model.config.windowed(state.layer);
        text_disabled(ui, {{"view", "layer-kind"}, {"layer", state.layer}, {"local", local}}, "%s",
                      local ? "local" : "global");
        ImGui::SameLine();
    }
    enum_combo(ui, "colormap", ui.colormap, colormap_choices.labels, 120 * ui.scale);
    ImGui::SameLine();
    legend(s, ui);

    // Head count: every count head_split accepts; the same weights, re-split.
    const int heads_now = state.options.n_head ? state.options.n_head : model.config.n_head;
    ImGui::SetNextItemWidth(90 * ui.scale);
    if (ImGui::BeginCombo("heads", std::to_string(heads_now).c_str())) {
        for (int n : head_counts(model.config)) {
            if (ImGui::Selectable(std::to_string(n).c_str(), n == heads_now)) {
                state.options.n_head = n == model.config.n_head ? 0 : n;
                state.options.ablate.clear();  // the knocked-out heads were of the other split
                changed = true;
            }
        }
        ImGui::EndCombo();
    }
    ImGui::SameLine();
    // "head" is the model's own scale: a Gemma's (query_pre_attn_scalar^-1/2) by its number.
    char model_scale[32] = "";
    if (const float a = model.config.attention_scale; a > 0)
        std::snprintf(model_scale, sizeof model_scale, "1/sqrt(%.4g)", 1 / (a * a));
    const char* const scale_labels[] = {model_scale[0] ? model_scale : scale_choices.labels[0], scale_choices.labels[1],
                                        scale_choices.labels[2]};
    changed |= enum_combo(ui, "scale", state.options.scale, scale_labels, 130 * ui.scale);
    ImGui::SameLine();
    changed |= enum_combo(ui, "split", state.options.split, split_choices.labels, 150 * ui.scale);
    ImGui::SameLine();
    head_controls(state, s, ui, changed);
    differences_note(state, s, ui);

    // Page Up / Page Down step through the layers when no text field has the keyboard.
    if (!ImGui::GetIO().WantTextInput) {
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_PageDown)))
            state.layer = std::min(state.layer + 1, layers - 1);
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_PageUp))) state.layer = std::max(state.layer - 1, 0);
    }
    if (changed) s.submit();
}

// How knocked-out heads are replaced, and how the maps are shaded.
void ControlsView::head_controls(WindowState& state, Session& s, Ui& ui, bool& changed) {
    // Mean ablation needs the whole text: it only changes the maps while a head is out.
    changed |= enum_combo(ui, "knock out to", state.options.ablation, ablation_choices.labels, 110 * ui.scale,
                          "knock out to") &&
               !state.options.ablate.empty();
    if (ui.tooltips && ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "a head's checkbox knocks it out: its output is replaced by zero or by its mean over the text");
    ImGui::SameLine();
    checkbox(ui, "hide first key", &state.shading.hide_first_key, "hide first key");
    if (ui.tooltips && ImGui::IsItemHovered())
        ImGui::SetTooltip("rows renormalised without key 0, where many heads park their weight (the sink)");
    ImGui::SameLine();
    const bool value_weighted = state.shading.value_weighted;
    checkbox(ui, "weight x |value|", &state.shading.value_weighted, "weight x value");
    if (ui.tooltips && ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "|alpha v W_O|: how much each key sends, not only how much it is looked at (rows scaled to 1)");
    if (state.shading.value_weighted && !value_weighted && s.shown.attention.value_weighted.empty()) changed = true;
    const std::string refusal = s.contributions_refusal();
    if (state.shading.value_weighted && !refusal.empty()) {
        ImGui::SameLine();
        ImGui::TextColored(warning_colour, "(%s)", refusal.c_str());
    }
    if (s.shown_second_start() < 0) return;  // the sentence filter needs a pair
    ImGui::SameLine();
    enum_combo(ui, "sentences", state.shading.sentences, sentences_choices.labels, 90 * ui.scale, "sentences");
    if (ui.tooltips && ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "only the queries of one text of the pair and the keys of one (A -> B: A's queries, B's keys)");
}

// The example texts: choosing one replaces the batch; and a text file's
// path, whose text replaces the selected text. While the texts are still
// an example's, what to look for in it.
void ControlsView::examples_menu(WindowState& state, Session& s, Ui& ui) {
    ImGui::SetNextItemWidth(300 * ui.scale);
    combo(ui, "##examples", "examples...", "examples", [&] {
        for (const Example& example : examples_)
            if (selectable(ui, example.title.c_str(),
                           {{"view", "control"}, {"name", "example"}, {"text", example.title}})) {
                state.texts = example.texts;
                state.selected = 0;
                s.submit();
            }
        if (!examples_error_.empty()) ImGui::TextDisabled("no examples: %s", examples_error_.c_str());
    });
    ImGui::SameLine();
    ImGui::SetNextItemWidth(220 * ui.scale);
    const bool entered = text_input(ui, "##text file", "text file (or drop a .txt here)", &text_path_, nullptr,
                                    ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    if ((button(ui, "Open text") || entered) && !text_path_.empty()) s.open_text_file(text_path_);
    for (const Example& example : examples_) {
        if (example.texts != state.texts) continue;
        ImGui::SameLine();
        ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
        ImGui::TextWrapped("%s", example.look_for.c_str());
        ImGui::PopStyleColor();
        break;
    }
}

// Next token (greedy), sample, generate N with the sampling's settings, and
// stop; once a generation is shown, the step slider that replays it and its
// tokens in their own colour (they are in the text box too). Recorded for
// --layout: the buttons as controls, and {"view": "generation", "steps",
// "step", "stop", "ids", "text"}.
void ControlsView::generation_controls(WindowState& state, Session& s, Ui& ui) {
    ImGui::BeginGroup();
    const std::string refusal = prefix_reuse_refusal(s.generation_options());
    const bool can = state.texts.size() == 1 && refusal.empty() && !s.generating();
    ImGui::BeginDisabled(!can);
    if (button(ui, "next token", "next token")) s.generate(Sampling{}, 1);
    ImGui::SameLine();
    if (button(ui, "sample", "sample")) s.generate(sampling_, 1);
    ImGui::SameLine();
    if (button(ui, "generate", "generate")) s.generate(sampling_, tokens_);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(90 * ui.scale);
    ImGui::InputInt("tokens", &tokens_);
    tokens_ = std::clamp(tokens_, 1, s.model().config.n_positions);
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::BeginDisabled(!s.generating());
    if (button(ui, "stop", "stop")) s.stop_generation();
    ImGui::EndDisabled();

    ImGui::SetNextItemWidth(80 * ui.scale);
    ImGui::SliderFloat("temperature", &sampling_.temperature, 0, 2, "%.2f");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(80 * ui.scale);
    ImGui::InputInt("top-k", &sampling_.top_k);
    sampling_.top_k = std::max(sampling_.top_k, 0);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(70 * ui.scale);
    ImGui::SliderFloat("top-p", &sampling_.top_p, 0.01f, 1, "%.2f", ImGuiSliderFlags_AlwaysClamp);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(80 * ui.scale);
    ImGui::InputScalar("seed", ImGuiDataType_U64, &sampling_.seed);
    compare_box(state, s, ui);

    if (!s.generation) {
        if (state.texts.size() != 1)
            ImGui::TextDisabled("generation runs on a batch of one text");
        else if (!refusal.empty()) {
            // Wrapped at the window's edge: the reason is a sentence.
            ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
            ImGui::TextWrapped("generation needs the causal model: %s", refusal.c_str());
            ImGui::PopStyleColor();
        }
    } else {
        GenerationShown& g = *s.generation;
        const int steps = static_cast<int>(g.steps.size());
        ImGui::SetNextItemWidth(140 * ui.scale);
        slider_int(ui, "step", &g.step, 0, steps, "step");
        nlohmann::ordered_json ids = nlohmann::ordered_json::array();
        for (const GenerationStep& step : g.steps) ids.push_back(step.id);
        ui.layout.item({{"view", "generation"},
                        {"steps", steps},
                        {"step", g.step},
                        {"stop", to_string(g.stop)},
                        {"ids", ids},
                        {"text", state.texts[0]}});
        ImGui::SameLine();
        if (g.stop != Stop::running)
            ImGui::TextDisabled("stopped: %s", to_string(g.stop));
        else if (s.generating())
            ImGui::TextDisabled("generating...");
        // The generated tokens, the last that fit; those after the replayed step dimmed.
        ImGui::SameLine();
        const ImVec2 at = ImGui::GetCursorScreenPos();
        const float right = at.x + std::max(0.f, ImGui::GetContentRegionAvail().x);
        std::vector<std::string> shown;
        for (const GenerationStep& step : g.steps) shown.push_back(visible_text(step.token));
        float width = 0;
        int first = steps;
        while (first > 0 && width + ImGui::CalcTextSize(shown[first - 1].c_str()).x <= right - at.x)
            width += ImGui::CalcTextSize(shown[--first].c_str()).x;
        float x = at.x;
        for (int i = first; i < steps; ++i) {
            ImVec4 colour = generated_colour;
            if (i >= g.step) colour.w = 0.4f;
            ImGui::GetWindowDrawList()->AddText(ImVec2(x, at.y), ImGui::GetColorU32(colour), shown[i].c_str());
            x += ImGui::CalcTextSize(shown[i].c_str()).x;
        }
        ImGui::Dummy(ImVec2(width, ImGui::GetTextLineHeight()));
    }
    ImGui::EndGroup();
}

// The colormap from 0 to 1, and the masked look; with the diff shown, the diverging one from -scale to +scale.
void ControlsView::legend(const Session& s, Ui& ui) {
    const int width = static_cast<int>(100 * ui.scale), height = static_cast<int>(ImGui::GetFrameHeight());
    const bool diff = s.diff_shown();
    const Colormap colormap = diff ? Colormap::diverging : ui.colormap;
    if (legend_.width() != width || legend_colormap_ != colormap) {
        ui.renderer.render_legend(colormap, width, height, legend_);
        legend_colormap_ = colormap;
    }
    if (diff)
        text(ui, {{"view", "diff-legend"}, {"scale", s.diff_scale()}}, "B - A %+.3f", -s.diff_scale());
    else
        ImGui::TextUnformatted("0");
    ImGui::SameLine();
    image(legend_, ImVec2(static_cast<float>(width), static_cast<float>(height)));
    ImGui::SameLine();
    if (diff)
        ImGui::Text("%+.3f", s.diff_scale());
    else
        ImGui::TextUnformatted("1");
    if (masked_swatch_.width() != height) {
        const HeatmapImage masked{.rows = 1, .cols = 1, .cells = {masked_cell}};
        ui.renderer.upload(masked, masked_swatch_);
        ui.renderer.draw(ui.colormap, height, height, masked_swatch_);
    }
    ImGui::SameLine();
    image(masked_swatch_, ImVec2(static_cast<float>(height), static_cast<float>(height)));
    ImGui::SameLine();
    ImGui::TextUnformatted("masked");
}

}  // namespace headscope
