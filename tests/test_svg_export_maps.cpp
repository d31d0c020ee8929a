// More of the window's SVG export read back with expat (svg_export_test.h):
// grouped-query heads named by their key/value head, learned sinks' columns,
// a figure of more cells than it holds pooled as the window pools, the tokens
// tab's colours, and the tabs without a figure refused.
#include <expat.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "family_models.h"
#include "svg_export_test.h"

using namespace headscope;
using nlohmann::json;

namespace {

using namespace headscope::test::svg;

// A grouped-query model (a Llama: query heads 0-1 share key/value head 0,
// 2-3 head 1): each head's title names its key/value head, the model tab's
// header each group's first head, and every cell is the window's pixel.
TEST_F(SvgExport, GroupedHeadsNameTheirKeyValueHead) {
    const std::filesystem::path model = dir_->path / "llama";
    test::write_family_model(model, test::family_variant("llama"));
    for (const std::string view : {"heads", "model"}) {
        const std::filesystem::path svg = dir_->path / ("llama-" + view + ".svg");
        const test::WindowShot shot =
            test::shoot_window({"--model", model.string(), "--text", "The cat sat on the mat.", "--view", view,
                                "--export-svg", svg.string()},
                               dir_->path, "llama-" + view);
        ASSERT_EQ(shot.run.status, 0) << shot.run.err;
        std::string error;
        const std::unique_ptr<Element> root = parse_xml(test::read_file(svg), error);
        ASSERT_TRUE(root) << error;
        check_against_screen(*root, shot, view);
        if (view == "heads") {
            for (const Element* map : root->all("g", "map")) {
                const int h = std::stoi(map->get("data-head"));
                const std::string title = map->group("title").children.at(0)->text;
                EXPECT_EQ(title.substr(title.size() - 6), "  kv " + std::to_string(h / 2)) << title;
            }
        } else {
            std::vector<std::string> headers;
            for (const auto& text : root->group("heads").children) headers.push_back(text->text);
            EXPECT_EQ(headers, (std::vector<std::string>{"H0  kv 0", "H1", "H2  kv 1", "H3"}));
        }
    }
}

// gpt-oss's learned sinks: each map's <g class="sink"> column, left of its
// key 0 and apart from it, holds the CLI's sink_weight through viridis, each
// cell in its row; the keys' cells are still the weights, and both are the
// window's pixels.
TEST_F(SvgExport, LearnedSinksHaveTheirColumnLeftOfKeyZero) {
    const std::filesystem::path model = dir_->path / "gpt_oss";
    test::write_family_model(model, test::family_variant("gpt_oss"));
    const Export e = export_svg("gpt-oss-heads", {"--layer", "1"}, {"--model", model.string()});
    ASSERT_TRUE(e.svg);
    ASSERT_TRUE(e.cli.contains("sink_weight"));
    const int T = e.cli["seq_len"];
    EXPECT_EQ(check_maps(*e.svg, e.cli, true).size(), 4u);
    check_against_screen(*e.svg, e.shot, "heads");
    check_against_screen(*e.svg, e.shot, "sink", "sink", "column");
    for (const Element* map : e.svg->all("g", "map")) {
        const int h = std::stoi(map->get("data-head"));
        const Element &sink = map->group("sink"), &cells = map->group("cells");
        ASSERT_EQ(sink.children.size(), static_cast<size_t>(T)) << h;
        EXPECT_EQ(map->group("sink-label").children.at(0)->text, "sink");
        const double key0 = std::stod(cells.children.front()->get("x"));
        for (int i = 0; i < T; ++i) {
            const Element& rect = *sink.children[static_cast<size_t>(i)];
            EXPECT_LT(std::stod(rect.get("x")) + std::stod(rect.get("width")), key0);
            EXPECT_NEAR(std::stod(rect.get("y")), std::stod(cells.children[static_cast<size_t>(i) * T]->get("y")),
                        0.011);
            const double weight = e.cli["sink_weight"][1][0][h][i];
            EXPECT_TRUE(near(fill_rgb(rect.get("fill")), test::viridis(weight)))
                << "head " << h << " row " << i << ": " << rect.get("fill") << " for sink weight " << weight;
        }
    }
}

// A figure of a million cells streamed through expat (no tree): each map's
// size, its cells' fills in order (masked: the hatch) and how many texts it holds.
struct StreamedMap {
    int layer = 0, head = 0, rows = 0, cols = 0, texts = 0;
    std::vector<std::string> fills;
};

std::vector<StreamedMap> stream_maps(const std::filesystem::path& path) {
    struct State {
        std::vector<StreamedMap> maps;
        int depth = 0, map_depth = -1;  // the open map's element depth; -1: none open
    } state;
    XML_Parser parser = XML_ParserCreate("UTF-8");
    XML_SetUserData(parser, &state);
    XML_SetElementHandler(
        parser,
        [](void* data, const XML_Char* name, const XML_Char** attributes) {
            State& st = *static_cast<State*>(data);
            ++st.depth;
            std::map<std::string, std::string> a;
            for (int k = 0; attributes[k]; k += 2) a[attributes[k]] = attributes[k + 1];
            const std::string element = name;
            if (element == "g" && a["class"] == "map") {
                st.maps.push_back({std::stoi(a["data-layer"]), std::stoi(a["data-head"]), 0, 0, 0, {}});
                st.map_depth = st.depth;
            } else if (st.map_depth >= 0 && element == "g" && a["class"] == "cells") {
                st.maps.back().rows = std::stoi(a["data-rows"]);
                st.maps.back().cols = std::stoi(a["data-cols"]);
            } else if (st.map_depth >= 0 && element == "rect") {
                st.maps.back().fills.push_back(a["fill"]);
            } else if (st.map_depth >= 0 && element == "text") {
                ++st.maps.back().texts;
            }
        },
        [](void* data, const XML_Char*) {
            State& st = *static_cast<State*>(data);
            if (st.depth-- == st.map_depth) st.map_depth = -1;
        });
    std::ifstream in(path, std::ios::binary);
    std::vector<char> chunk(1 << 20);
    bool ok = true;
    while (ok && in) {
        in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        ok = XML_Parse(parser, chunk.data(), static_cast<int>(in.gcount()), in ? 0 : 1) == XML_STATUS_OK;
    }
    EXPECT_TRUE(ok) << path << ": " << XML_ErrorString(XML_GetErrorCode(parser)) << " at line "
                    << XML_GetCurrentLineNumber(parser);
    XML_ParserFree(parser);
    return state.maps;
}

// 64 heads of 140 tokens are 1.25 million cells, more than a figure holds
// (2^20): each map is max-pooled to 128 x 128 as the window pools (a cell
// the largest visible weight of its block of queries and keys, hatched when
// the whole block is masked), and the token labels are left out.
TEST_F(SvgExport, ManyCellsArePooledAsTheWindowPoolsThem) {
    const std::filesystem::path model = dir_->path / "wide";
    test::write_test_model(model, {.n_layer = 1, .n_head = 64, .n_embd = 64, .n_positions = 160});
    std::string words;
    for (int k = 0; k < 140; ++k) words += " x";
    const std::filesystem::path svg = dir_->path / "pooled.svg";
    const test::ProcessRun window =
        test::run_window({"--model", model.string(), "--text", words, "--screenshot",
                          (dir_->path / "pooled.png").string(), "--export-svg", svg.string()},
                         dir_->path);
    ASSERT_EQ(window.status, 0) << window.err;
    const test::ProcessRun cli =
        test::run_program({test::cli_program(), "attention", "--model", model.string(), "--text", words}, dir_->path);
    ASSERT_EQ(cli.status, 0) << cli.err;
    const json attention = json::parse(cli.out);
    const int T = attention["seq_len"], side = 128;
    ASSERT_EQ(T, 140);
    const std::vector<StreamedMap> maps = stream_maps(svg);
    ASSERT_EQ(maps.size(), 64u);
    for (const StreamedMap& map : maps) {
        EXPECT_EQ(map.layer, 0);
        EXPECT_EQ(map.rows, side);
        EXPECT_EQ(map.cols, side);
        EXPECT_EQ(map.texts, 1) << "head " << map.head << ": its title alone";
        ASSERT_EQ(map.fills.size(), static_cast<size_t>(side) * side);
        const json& weights = attention["attention"][0][0][map.head];
        std::vector<double> pooled(static_cast<size_t>(side) * side, -1);  // -1: every cell of the block masked
        for (int i = 0; i < T; ++i)
            for (int j = 0; j <= i; ++j) {
                double& cell = pooled[static_cast<size_t>(i * side / T) * side + j * side / T];
                cell = std::max(cell, weights[i][j].get<double>());
            }
        for (size_t n = 0; n < pooled.size(); ++n) {
            if (pooled[n] < 0) {
                EXPECT_EQ(map.fills[n], "url(#masked)") << "head " << map.head << " cell " << n;
                continue;
            }
            EXPECT_TRUE(near(fill_rgb(map.fills[n]), test::viridis(pooled[n])))
                << "head " << map.head << " cell " << n << ": " << map.fills[n] << " for " << pooled[n];
        }
    }
}

// The tokens tab: the text's tokens in order, each on the colour of head
// 1's weight from query row 4 (white past it, where the causal mask hides
// it), the query outlined in the window's orange.
TEST_F(SvgExport, TokensTabColoursEachTokenByItsWeightFromTheQuery) {
    const Export e = export_svg("tokens", {"--view", "tokens", "--head", "1", "--query", "4"}, {});
    ASSERT_TRUE(e.svg);
    const json& tokens = e.cli["token_ids"][0];
    const json& row = e.cli["attention"][0][0][1][4];
    std::vector<const Element*> fills, texts;
    bool outlined = false;
    for (const auto& child : e.svg->group("tokens").children) {
        if (child->name == "text") texts.push_back(child.get());
        if (child->name != "rect") continue;
        if (child->get("fill") == "#ff9e40") {
            EXPECT_EQ(fills.size(), 4u) << "the outline is not the query's";
            outlined = true;
        } else {
            fills.push_back(child.get());
        }
    }
    EXPECT_TRUE(outlined);
    ASSERT_EQ(fills.size(), tokens.size());
    ASSERT_EQ(texts.size(), tokens.size());
    for (size_t t = 0; t < tokens.size(); ++t) {
        EXPECT_EQ(texts[t]->text, token_label(tokens[t]));
        if (t > 4) {
            EXPECT_EQ(fills[t]->get("fill"), "#ffffff") << "token " << t;
            continue;
        }
        const double weight = row[t];
        EXPECT_TRUE(near(fill_rgb(fills[t]->get("fill")), test::viridis(weight)))
            << "token " << t << ": " << fills[t]->get("fill") << " for " << weight;
    }
    EXPECT_EQ(e.svg->group("description").children.size(), 1u);
    check_legend(*e.svg);
}

TEST_F(SvgExport, TabsWithoutAFigureAreRefusedBeforeTheWindowOpens) {
    for (const char* view : {"effects", "patching", "mask", "dance", "checks"}) {
        const test::ProcessRun run = test::run_window({"--view", view, "--screenshot", (dir_->path / "x.png").string(),
                                                       "--export-svg", (dir_->path / "x.svg").string()},
                                                      dir_->path);
        test::expect_one_line_error(run, "headscope",
                                    "--export-svg: Save SVG draws the heads, tokens, model and logit-lens tabs");
        EXPECT_FALSE(std::filesystem::exists(dir_->path / "x.svg"));
    }
}

}  // namespace
