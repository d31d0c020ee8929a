#include "widgets/map_tooltips.h"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>

#include "headscope/inspect/attention_export.h"
#include "headscope/inspect/explanations.h"
#include "headscope/inspect/probes.h"
#include "widgets/texts.h"

namespace headscope {

namespace {

// Why head `head` attends from query i to key j (BertViz's neuron view): the
// score q . k as its head dimensions' terms (before and after a soft cap), q,
// k and the terms as bars, the largest terms, and the biases' part where the
// model has them.
void why_it_attends(Ui& ui, const WindowState& state, const Session& session, int layer, int head, int i, int j) {
    const ScoreTerms s = explain_score(session.model(), session.shown.attention, session.shown_options, layer,
                                       state.selected, head, i, j);
    ImGui::Separator();
    ImGui::Text("why: q . k = %.3f, times %.3f: score %.3f", s.score, s.scale, s.score * s.scale);
    if (!s.rope_pairs.empty()) {
        const int turned = 2 * static_cast<int>(s.rope_pairs.size());
        const std::string pairs = rope_pairs_in_words(session.model().config, turned);
        text_wrapped(
            ui, {{"view", "tooltip"}, {"name", "rope"}, {"dims", turned}, {"pairs", pairs}, {"query", i}, {"key", j}},
            "RoPE turned q and k's first %d dims in %s; each pair's two terms together see only the "
            "distance %d - %d",
            turned, pairs.c_str(), i, j);
    }
    if (const float cap = session.model().config.attention_softcap; cap > 0)  // Gemma 2's
        text(ui,
             {{"view", "tooltip"},
              {"name", "soft cap"},
              {"cap", cap},
              {"score", s.score * s.scale},
              {"capped", s.softmax_input}},
             "soft-capped, %g tanh(score / %g): %.3f, what the softmax reads", cap, cap, s.softmax_input);
    const ImVec2 bars(std::floor(ImGui::GetFontSize() * 18), std::floor(ImGui::GetFontSize() * 2.5f));
    const int hs = static_cast<int>(s.terms.size());
    ImGui::PlotHistogram("q", s.q.data(), hs, 0, nullptr, FLT_MAX, FLT_MAX, bars);
    ImGui::PlotHistogram("k", s.k.data(), hs, 0, nullptr, FLT_MAX, FLT_MAX, bars);
    ImGui::PlotHistogram("q_i k_i", s.terms.data(), hs, 0, nullptr, FLT_MAX, FLT_MAX, bars);
    const auto dims = [&](const std::vector<int>& which) {
        std::string text;
        for (int d : which) {
            char term[32];
            std::snprintf(term, sizeof term, "  d%d %+.3f", d, s.terms[d]);
            text += term;
        }
        return text;
    };
    ImGui::Text("largest terms:%s", dims(s.largest).c_str());
    ImGui::Text("most negative:%s", dims(s.smallest).c_str());
    if (s.biases_apart)
        ImGui::Text("weights.weights %+.3f  weights.bias %+.3f  bias.weights %+.3f  bias.bias %+.3f", s.weights_weights,
                    s.weights_bias, s.bias_weights, s.bias_bias);
}

// What the shading and the contributions add about a visible cell.
void more_about_the_cell(Ui& ui, const WindowState& state, const Session& session, int layer, int head, int i, int j) {
    const AttentionResult& att = session.shown.attention;
    const size_t map = (static_cast<size_t>(layer) * att.B + state.selected) * att.NH + head;
    if (!att.value_weighted.empty())
        ImGui::Text("weight x |value W_O| %.4f", att.value_weighted[(map * att.T + i) * att.T + j]);
    const float* row = att.row(layer, state.selected, head, i);
    // With a learned sink, "sink" alone would name two things: key 0 is a token.
    const bool learned = session.model().config.attention_sinks;
    if (state.shading.hide_first_key && j > 0 && row[0] < 1)
        ImGui::Text("%s %.4f; without it this weight is %.4f",
                    learned ? "key 0 (a token, not the learned sink)" : "first key (the sink)", row[0],
                    row[j] / (1 - row[0]));
    if (state.shading.hide_first_key)
        ImGui::Text(
            learned ? "the head's key-0 mass %.3f (its rows' mean weight on key 0)" : "the head's sink mass %.3f",
            sink_mass(att, layer, state.selected, head, session.length(state.selected)));
    if (att.keeps_queries()) why_it_attends(ui, state, session, layer, head, i, j);
}

// Whether query row i of the selected text's maps attends to nothing.
bool row_masked(const Session& session, const ShownMaps& maps, int i) {
    const bool pad_query = i >= maps.query_length && session.shown_options.padding_mask;
    return pad_query || (maps.kind == AttentionKind::decoder && maps.result->row_fully_masked(maps.b, i));
}

constexpr const char* masked_row_text = "masked: this query row has nothing to attend to (all zeros, never NaN)";

}  // namespace

void map_tooltip(Ui& ui, const WindowState& state, const Session& session, const ShownMaps& maps, int layer, int head,
                 int i, int j) {
    const float* row = maps.row(layer, maps.b, head, i);
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(head_label(session, layer, head).c_str());
    if (maps.kind != AttentionKind::decoder)
        ImGui::TextDisabled("%s", attention_kind_choices.labels[static_cast<int>(maps.kind)]);
    ImGui::Text("query %d %s  ->  key %d %s", i, query_token(session, maps, i, true).c_str(), j,
                key_token(session, maps, j, true).c_str());
    if (maps.visible(session.maps_options_at(maps, layer), i, j)) {
        text(ui,
             {{"view", "tooltip"},
              {"name", "weight"},
              {"layer", layer},
              {"head", head},
              {"query", i},
              {"key", j},
              {"weight", row[j]}},
             "weight %.4f   row entropy %.3f nats", row[j], row_entropy(row, maps.cols));
        if (session.diff_shown()) {
            const float compared = session.comparison().attention().row(layer, 0, head, i)[j];
            ImGui::Text("the compare text's (B) %.4f: B - A %+.4f", compared, compared - row[j]);
        }
        if (maps.sinks)
            ImGui::Text("the learned sink takes %.4f of this row (left of key 0): with the keys, 1",
                        learned_sink_weight(*maps.result, layer, maps.b, head, i));
        if (maps.kind == AttentionKind::decoder && !maps.patched)
            more_about_the_cell(ui, state, session, layer, head, i, j);
    } else if (row_masked(session, maps, i))
        ImGui::TextUnformatted(masked_row_text);
    else
        ImGui::TextUnformatted("masked: this query may not see this key");
    ImGui::EndTooltip();
}

void sink_tooltip(Ui& ui, const Session& session, const ShownMaps& maps, int layer, int head, int i) {
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(head_label(session, layer, head).c_str());
    ImGui::Text("query %d %s  ->  the learned sink", i, query_token(session, maps, i, true).c_str());
    if (row_masked(session, maps, i)) {
        ImGui::TextUnformatted(masked_row_text);
    } else {
        const float w = learned_sink_weight(*maps.result, layer, maps.b, head, i);
        text(ui, {{"view", "tooltip"}, {"name", "sink"}, {"layer", layer}, {"head", head}, {"query", i}, {"weight", w}},
             "the learned sink: weight %.4f (1 - the keys' %.4f)", w, 1 - w);
    }
    const float* logits = session.model().layers[maps.result->layers[layer]].sinks;
    if (logits && session.heads_shown() == session.model().config.n_head)
        ImGui::Text("its logit %.3f joins every row's softmax denominator; it has no value", logits[head]);
    ImGui::EndTooltip();
}

}  // namespace headscope
