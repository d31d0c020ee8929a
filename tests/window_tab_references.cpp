// The window's tabs against the reference (window_tab_references.h).
#include "window_tab_references.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "prediction_checks.h"
#include "window_reference_cells.h"

namespace headscope::test {

using nlohmann::json;

TabReference tab_reference(const FamilyCheckpoint& checkpoint, std::vector<int32_t> ids, int layer) {
    const FamilySpec& spec = checkpoint.spec;
    AttentionOptions options;
    options.sliding_window = spec.sliding_window;
    TabReference r{checkpoint, std::move(ids), layer, {}, {}};
    r.forward = family_reference(checkpoint, {r.ids}, options);
    for (int l = 0; l < spec.n_layer; ++l) {
        const std::vector<double> logits =
            family_logits(checkpoint, real_rows(r.forward.residual, l, {r.ids}, r.T(), spec.n_embd));
        r.lens.insert(r.lens.end(), logits.begin(), logits.end());
    }
    return r;
}

namespace {

// The reference's distribution of the next token after position t, read after layer l.
ReferenceRow lens_row(const TabReference& want, int l, int t, int count) {
    const int V = want.checkpoint.spec.vocab_size;
    return reference_row(&want.lens[(size_t(l) * want.T() + t) * V], V, count);
}

// The weight head h of layer l gives key j from query i.
double weight(const TabReference& want, int l, int h, int i, int j) {
    const int T = want.T();
    return want.forward.weights[((size_t(l) * want.forward.NH + h) * T + i) * T + j];
}

// The text's mean loss over its next tokens, with the output of head `head` of layer `layer` zeroed (none: -1).
double loss_without(const TabReference& want, int layer, int head) {
    const FamilyCheckpoint& model = want.checkpoint;
    AttentionOptions options;
    options.sliding_window = model.spec.sliding_window;
    FamilyHooks hooks;
    hooks.head_output = [&](int l, int, int h, std::vector<std::vector<double>>& y) {
        if (l == layer && h == head)
            for (auto& row : y) std::fill(row.begin(), row.end(), 0.0);
    };
    const FamilyReference r = family_reference(model, {want.ids}, options, hooks);
    const std::vector<double> logits =
        family_logits(model, real_rows(r.residual, model.spec.n_layer - 1, {want.ids}, want.T(), model.spec.n_embd));
    return loss_and_p(logits, model.spec.vocab_size, want.ids, std::vector<Prediction>(want.ids.size(), {0, 0})).first;
}

}  // namespace

void expect_heads_tab(const WindowShot& shot, const TabReference& want) {
    const FamilySpec& spec = want.checkpoint.spec;
    const int T = want.T(), L = spec.n_layer;
    expect_reference_cells(shot, spec, want.forward, T, want.layer);
    // gpt-oss's learned sink: its cell in row i 1 - the row's weights on the keys.
    const json sinks = entries(shot.layout, "sink");
    EXPECT_EQ(sinks.size(), spec.family == Family::gpt_oss ? size_t(want.forward.NH * T) : 0u);
    for (const json& cell : sinks) {
        const int h = cell["head"], i = cell["query"];
        double keys = 0;
        for (int j = 0; j <= i; ++j) keys += weight(want, want.layer, h, i, j);
        EXPECT_TRUE(near(centre(shot.image, cell), viridis(1 - keys))) << "sink of head " << h << " row " << i;
    }
    std::vector<Prediction> got;
    for (const json& bar : entries(shot.layout, "prediction")) got.push_back({bar["id"], bar["p"]});
    ASSERT_EQ(got.size(), 10u);
    Mismatches m;
    compare_top(got.data(), 10, spec.vocab_size, lens_row(want, L - 1, T - 1, 10), "the predictions panel", m);
    EXPECT_EQ(m.count, 0) << m.first;
}

void expect_model_tab(const WindowShot& shot, const TabReference& want) {
    const FamilySpec& spec = want.checkpoint.spec;
    const int T = want.T();
    const json cells = entries(shot.layout, "model");
    ASSERT_EQ(cells.size(), size_t(spec.n_layer) * want.forward.NH * T * T);
    expect_map_cells(shot.image, cells, spec, want.forward, T);
    const json rows = entries(shot.layout, "model-layer");
    ASSERT_EQ(rows.size(), size_t(spec.n_layer));
    for (const json& row : rows) {
        const int l = row["layer"];
        const std::string kind = !layers_differ(spec) ? "" : spec.windowed(l) ? " local" : " global";
        EXPECT_EQ(row["text"], "L" + std::to_string(l) + kind);
    }
}

void expect_tokens_tab(const WindowShot& shot, const TabReference& want) {
    const FamilySpec& spec = want.checkpoint.spec;
    const int T = want.T(), last = T - 1;
    const json tokens = entries(shot.layout, "token");
    ASSERT_EQ(tokens.size(), size_t(T));
    for (const json& token : tokens) {
        const int j = token["token"];
        if (spec.windowed(want.layer) && j <= last - spec.sliding_window) {
            EXPECT_TRUE(token["weight"].is_null()) << "token " << j << " is outside the window";
            continue;
        }
        ASSERT_FALSE(token["weight"].is_null()) << "token " << j;
        EXPECT_NEAR(token["weight"].get<double>(), weight(want, want.layer, 0, last, j), 1e-5) << "token " << j;
    }
}

void expect_lens_tab(const WindowShot& shot, const TabReference& want) {
    const int L = want.checkpoint.spec.n_layer, T = want.T();
    const json cells = entries(shot.layout, "lens"), tops = entries(shot.layout, "lens-top");
    ASSERT_EQ(cells.size(), size_t(L * T));
    ASSERT_EQ(tops.size(), size_t(L * T));  // every cell wide enough for its token
    for (size_t n = 0; n < cells.size(); ++n) {
        const json &cell = cells[n], &top = tops[n];
        const int l = cell["layer"], t = cell["position"];
        ASSERT_EQ(top["layer"], l);
        ASSERT_EQ(top["position"], t);
        const ReferenceRow row = lens_row(want, l, t, 2);
        const double p = std::exp(row.logp[row.order[0]]);
        EXPECT_NEAR(top["p"].get<double>(), p, 1e-5) << "layer " << l << " position " << t;
        if (p - std::exp(row.logp[row.order[1]]) > tie) {
            EXPECT_EQ(top["id"], row.order[0]) << "layer " << l << " position " << t;
        }
        // In the cell's corner, clear of its token's text.
        const std::array<int, 3> got =
            shot.image.at(static_cast<int>(cell["x"].get<double>()) + 1, static_cast<int>(cell["y"].get<double>()) + 1);
        EXPECT_TRUE(near(got, viridis(p)))
            << "layer " << l << " position " << t << " p " << p << " is " << got[0] << "," << got[1] << "," << got[2];
    }
}

void expect_router_tab(const WindowShot& shot, const TabReference& want) {
    const int T = want.T(), k = want.checkpoint.spec.experts_per_token;
    const json cells = entries(shot.layout, "router");
    ASSERT_EQ(cells.size(), size_t(want.checkpoint.spec.n_layer) * T);
    for (const json& cell : cells) {
        const int l = cell["layer"], t = cell["position"];
        const size_t at = (size_t(l) * T + t) * k;
        const int expert = want.forward.router_experts[at];
        const std::array<int, 3> got = centre(shot.image, cell);
        EXPECT_TRUE(near(got, expert < 0 ? dense_layer_rgb : expert_rgb(expert, want.forward.router_weights[at])))
            << "layer " << l << " position " << t << ": expert " << expert << ", drawn " << got[0] << "," << got[1]
            << "," << got[2];
    }
}

void expect_effects_tab(const WindowShot& shot, const TabReference& want) {
    const int L = want.checkpoint.spec.n_layer, NH = want.forward.NH;
    const json grid = entries(shot.layout, "effects-grid");
    ASSERT_EQ(grid.size(), size_t(L * NH));
    const double intact = loss_without(want, -1, -1);
    for (const json& cell : grid) {
        const int l = cell["layer"], h = cell["column"];
        // Every cell exact: the hybrid grid's 16 largest and 8 others cover the test models' heads.
        EXPECT_FALSE(cell["marked"][l * NH + h].get<bool>()) << "head " << l << "." << h << " estimated";
        EXPECT_NEAR(cell["values"][l * NH + h].get<double>(), loss_without(want, l, h) - intact, 1e-5)
            << "head " << l << "." << h;
    }
    EXPECT_FALSE(entries(shot.layout, "attribution-grid").empty());
}

void expect_patching_tab(const WindowShot& shot, const TabReference& want) {
    const ReferenceRow row = lens_row(want, want.checkpoint.spec.n_layer - 1, want.T() - 1, 2);
    ASSERT_GT(std::exp(row.logp[row.order[0]]) - std::exp(row.logp[row.order[1]]), tie);
    std::map<std::string, int> tokens;
    for (const json& token : entries(shot.layout, "patch-token")) tokens[token["name"]] = token["id"];
    EXPECT_EQ(tokens["answer"], row.order[0]);
    EXPECT_NE(tokens["wrong"], row.order[0]);
}

void expect_mask_tab(const WindowShot& shot, const TabReference& want) {
    const int T = want.T();
    const json cells = entries(shot.layout, "mask_attention");
    ASSERT_EQ(cells.size(), size_t(T * T));
    for (const json& cell : cells) ASSERT_EQ(cell["layer"], want.layer);
    expect_map_cells(shot.image, cells, want.checkpoint.spec, want.forward, T);
}

void expect_dance_tab(const WindowShot& shot, const TabReference& want) {
    const json steps = entries(shot.layout, "dance-step");
    ASSERT_EQ(steps.size(), 1u);
    const std::vector<int64_t> shape = steps[0]["shape"];
    ASSERT_EQ(shape.size(), 3u);
    EXPECT_EQ(shape[0], 1);
    EXPECT_EQ(shape[1], want.T());
    // The memory of the buffer the step views, a cell a float: whole token rows, as many floats as the view
    // reads at least (a fused projection's buffer holds Q, K and V).
    const size_t floats = entries(shot.layout, "dance").size();
    EXPECT_EQ(floats % size_t(want.T()), 0u);
    EXPECT_GE(floats, size_t(shape[1] * shape[2]));
}

void expect_checks_tab(const WindowShot& shot, const TabReference& want) {
    std::map<std::string, double> figures;
    for (const json& figure : entries(shot.layout, "checks"))
        if (figure["figure"] != "tensor") figures[figure["figure"]] = figure["value"];
    double largest_output = 0;
    for (double y : want.forward.outputs) largest_output = std::max(largest_output, std::abs(y));
    EXPECT_LT(figures.at("weight_diff"), 1e-5);
    EXPECT_LT(figures.at("output_diff"), 2e-5 * largest_output);
    EXPECT_EQ(figures.at("earlier_rows_diff"), 0.0);
    EXPECT_GT(figures.at("changed_row_diff"), 0.0);
    double parameters = 0;
    for (const auto* list : {&want.checkpoint.tensors, &want.checkpoint.unpacked})
        for (const NamedTensor& t : *list) parameters += double(t.values.size());
    EXPECT_EQ(figures.at("parameters"), parameters);
    // The model's table ends within the window, its long rows (a mixture's MLP) wrapped, not cut at its edge.
    for (const json& row : entries(shot.layout, "checks-config"))
        EXPECT_LE(row["x"].get<double>() + row["w"].get<double>(), shot.image.width)
            << row["name"] << ": " << row["text"];
}

}  // namespace headscope::test
