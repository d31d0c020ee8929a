// The window's vector export (Save SVG, --export-svg) read back with expat,
// an XML parser of its own: on the built-in model under Xvfb, every cell's
// fill against headscope-cli's weight through the tests' own viridis and
// against the window's own pixel for that cell, masked cells filled with
// the hatch, every token label against the CLI's tokens.
// And the writer's escaping of arbitrary bytes against nlohmann's dump (the
// CLI's JSON), which replaces invalid UTF-8 the same way.
#include <expat.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "family_models.h"
#include "headscope/io/svg.h"
#include "model_writer.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

struct Element {
    std::string name;
    std::map<std::string, std::string> attributes;
    std::string text;  // the character data directly inside
    std::vector<std::unique_ptr<Element>> children;
    Element* parent = nullptr;

    std::string get(const std::string& attribute) const {
        const auto found = attributes.find(attribute);
        return found == attributes.end() ? "" : found->second;
    }
    // Itself and every descendant named `name` whose class is `css_class` (any class when empty).
    std::vector<const Element*> all(const std::string& element, const std::string& css_class = "") const {
        std::vector<const Element*> found;
        if (name == element && (css_class.empty() || get("class") == css_class)) found.push_back(this);
        for (const auto& child : children) {
            const std::vector<const Element*> below = child->all(element, css_class);
            found.insert(found.end(), below.begin(), below.end());
        }
        return found;
    }
    // The one child <g class="css_class">; fails the test when there is not exactly one.
    const Element& group(const std::string& css_class) const {
        const Element* found = nullptr;
        int count = 0;
        for (const auto& child : children)
            if (child->name == "g" && child->get("class") == css_class) found = child.get(), ++count;
        EXPECT_EQ(count, 1) << "<g class=\"" << css_class << "\"> in <" << name << " class=\"" << get("class") << "\">";
        static const Element none;
        return found ? *found : none;
    }
};

// `xml` parsed by expat; null, saying why in `error`, when it is not well-formed.
std::unique_ptr<Element> parse_xml(const std::string& xml, std::string& error) {
    auto root = std::make_unique<Element>();
    Element* at = root.get();
    XML_Parser parser = XML_ParserCreate("UTF-8");
    XML_SetUserData(parser, &at);
    XML_SetElementHandler(
        parser,
        [](void* data, const XML_Char* name, const XML_Char** attributes) {
            Element*& at = *static_cast<Element**>(data);
            auto child = std::make_unique<Element>();
            child->name = name;
            for (int a = 0; attributes[a]; a += 2) child->attributes[attributes[a]] = attributes[a + 1];
            child->parent = at;
            at->children.push_back(std::move(child));
            at = at->children.back().get();
        },
        [](void* data, const XML_Char*) {
            Element*& at = *static_cast<Element**>(data);
            at = at->parent;
        });
    XML_SetCharacterDataHandler(parser, [](void* data, const XML_Char* text, int length) {
        (*static_cast<Element**>(data))->text.append(text, static_cast<size_t>(length));
    });
    const bool ok = XML_Parse(parser, xml.data(), static_cast<int>(xml.size()), 1) == XML_STATUS_OK;
    if (!ok)
        error = std::string(XML_ErrorString(XML_GetErrorCode(parser))) + " at line " +
                std::to_string(XML_GetCurrentLineNumber(parser));
    XML_ParserFree(parser);
    if (!ok || root->children.size() != 1) return nullptr;
    return std::move(root->children.front());
}

// What a reader of the XML gets for valid UTF-8 `text`: characters XML
// cannot hold (C0 controls, U+FFFE, U+FFFF) as U+FFFD.
std::string xml_readable(const std::string& text) {
    const std::string replacement = "\xEF\xBF\xBD";
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20) {
            out += replacement;
        } else if (c == 0xEF && text.compare(i, 2, "\xEF\xBF") == 0 && i + 2 < text.size() &&
                   (text[i + 2] == '\xBE' || text[i + 2] == '\xBF')) {
            out += replacement;
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

// A token as the window draws it (line feeds, carriage returns and tabs as
// \n, \r, \t), as an XML reader gets it.
std::string visible_label(const std::string& token) {
    std::string out;
    for (char c : token) out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : std::string(1, c);
    return xml_readable(out);
}

// Every byte sequence, as XML text and as an attribute value, reads back as
// nlohmann's dump has it (each maximal invalid subpart one U+FFFD), less
// what XML cannot hold.
TEST(SvgText, ArbitraryBytesReadBackAsTheCliWritesThem) {
    // Bytes near every boundary of UTF-8's table, and the markup characters.
    const std::vector<unsigned char> alphabet = {'a',  ' ',  '<',  '&',  '>',  '"',  '\'', 0x00, 0x01, 0x09, 0x0A, 0x0D,
                                                 0x1F, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBE, 0xBF, 0xC0, 0xC1, 0xC2,
                                                 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF3, 0xF4, 0xF5, 0xFF};
    std::mt19937 rng(19);
    std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1), length(0, 10);
    for (int n = 0; n < 20000; ++n) {
        std::string bytes;
        for (size_t k = length(rng); k > 0; --k) bytes += static_cast<char>(alphabet[pick(rng)]);
        const std::string want = xml_readable(
            json::parse(json(bytes).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>());
        const std::string escaped = xml_text(bytes);
        std::string error;
        const std::unique_ptr<Element> root = parse_xml("<t a=\"" + escaped + "\">" + escaped + "</t>", error);
        ASSERT_TRUE(root) << error << " for " << json(bytes).dump(-1, ' ', true, json::error_handler_t::replace);
        EXPECT_EQ(root->text, want) << json(bytes).dump(-1, ' ', true, json::error_handler_t::replace);
        EXPECT_EQ(root->get("a"), want);
    }
}

TEST(SvgText, HandWrittenCases) {
    const std::string bad = "\xEF\xBF\xBD";
    EXPECT_EQ(xml_text("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
    EXPECT_EQ(xml_text("caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80");
    EXPECT_EQ(xml_text("\xF0\x9F\x98"), bad);                        // a truncated sequence: one subpart
    EXPECT_EQ(xml_text("\xED\xA0\x80"), bad + bad + bad);            // a surrogate: ED does not take A0
    EXPECT_EQ(xml_text("\xC0\x80"), bad + bad);                      // overlong
    EXPECT_EQ(xml_text("\xF4\x90\x80\x80"), bad + bad + bad + bad);  // past U+10FFFF
    EXPECT_EQ(xml_text("\x01\tx\xEF\xBF\xBF"), bad + bad + "x" + bad);
}

// The built-in model on a text with markup characters, quotes, a tab, a line
// feed, a control character and UTF-8 of 2, 3 and 4 bytes.
const std::string text = "Tom & Jerry <b>\"hi\" 'yo'\tx\ny\x01z caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80!";

class SvgExport : public ::testing::Test {
protected:
    static void SetUpTestSuite() { dir_ = new test::TempDir; }
    static void TearDownTestSuite() { delete dir_; }

    struct Export {
        std::unique_ptr<Element> svg;
        json cli;               // headscope-cli attention for the same text and options
        test::WindowShot shot;  // the window's screenshot and layout as it wrote the SVG
    };

    // The window's --export-svg with `window_only` and `options`, and the CLI's attention with `options` and
    // `cli_only`.
    static Export export_svg(const std::string& name, const std::vector<std::string>& window_only,
                             const std::vector<std::string>& options, const std::vector<std::string>& cli_only = {}) {
        const std::filesystem::path svg = dir_->path / (name + ".svg");
        std::vector<std::string> args = {"--text", text, "--export-svg", svg.string()};
        args.insert(args.end(), window_only.begin(), window_only.end());
        args.insert(args.end(), options.begin(), options.end());
        test::WindowShot shot = test::shoot_window(args, dir_->path, name);
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        std::vector<std::string> cli = {test::cli_program(), "attention", "--text", text};
        cli.insert(cli.end(), options.begin(), options.end());
        cli.insert(cli.end(), cli_only.begin(), cli_only.end());
        const test::ProcessRun run = test::run_program(cli, dir_->path);
        EXPECT_EQ(run.status, 0) << run.err;
        std::string error;
        Export out{parse_xml(test::read_file(svg), error), json::parse(run.out), std::move(shot)};
        EXPECT_TRUE(out.svg) << svg << ": " << error;
        return out;
    }

    static test::TempDir* dir_;
};
test::TempDir* SvgExport::dir_ = nullptr;

std::array<int, 3> fill_rgb(const std::string& fill) {
    EXPECT_EQ(fill.size(), 7u) << fill;
    EXPECT_EQ(fill[0], '#') << fill;
    const long value = std::stol(fill.substr(1), nullptr, 16);
    return {static_cast<int>(value >> 16), static_cast<int>(value >> 8 & 0xFF), static_cast<int>(value & 0xFF)};
}

bool near(const std::array<int, 3>& got, const std::array<double, 3>& want) {
    for (int c = 0; c < 3; ++c)
        if (std::abs(got[c] - want[c]) > 1.0) return false;  // the GPU rounds to 8 bits
    return true;
}

// Every map's cells, row by row in their places: the viridis of the CLI's
// weight, or the hatch where `causal` hides the key. Returns the maps' (layer, head).
std::set<std::pair<int, int>> check_maps(const Element& svg, const json& cli, bool causal) {
    const int T = cli["seq_len"];
    std::set<std::pair<int, int>> maps;
    int masked = 0;
    for (const Element* map : svg.all("g", "map")) {
        const int layer = std::stoi(map->get("data-layer")), h = std::stoi(map->get("data-head"));
        maps.insert({layer, h});
        const Element& cells = map->group("cells");
        EXPECT_EQ(cells.get("data-rows"), std::to_string(T));
        EXPECT_EQ(cells.get("data-cols"), std::to_string(T));
        if (cells.children.size() != static_cast<size_t>(T) * T) {
            ADD_FAILURE() << "map " << layer << "," << h << ": " << cells.children.size() << " cells, T " << T;
            continue;
        }
        const Element& first = *cells.children.front();
        const double x0 = std::stod(first.get("x")), y0 = std::stod(first.get("y")), w = std::stod(first.get("width"));
        for (int i = 0; i < T; ++i)
            for (int j = 0; j < T; ++j) {
                const Element& rect = *cells.children[static_cast<size_t>(i) * T + j];
                EXPECT_EQ(rect.name, "rect");
                // In their places, to the hundredth of a unit the writer rounds to.
                EXPECT_NEAR(std::stod(rect.get("x")), x0 + j * w, 0.011);
                EXPECT_NEAR(std::stod(rect.get("y")), y0 + i * w, 0.011);
                if (causal && j > i) {
                    EXPECT_EQ(rect.get("fill"), "url(#masked)")
                        << "map " << layer << "," << h << " cell " << i << "," << j;
                    ++masked;
                    continue;
                }
                const double weight = cli["attention"][layer][0][h][i][j];
                EXPECT_TRUE(near(fill_rgb(rect.get("fill")), test::viridis(weight)))
                    << "map " << layer << "," << h << " cell " << i << "," << j << ": " << rect.get("fill")
                    << " for weight " << weight;
            }
    }
    EXPECT_EQ(masked, causal ? static_cast<int>(maps.size()) * T * (T - 1) / 2 : 0);
    return maps;
}

// The same bytes as on screen: at the centre of every visible cell the
// window drew in `view` (its --layout), the pixel is the SVG's fill (of the
// maps' <g class="css_class">, whose columns the layout names `column`).
void check_against_screen(const Element& svg, const test::WindowShot& shot, const std::string& view,
                          const std::string& css_class = "cells", const std::string& column = "key") {
    std::map<std::array<int, 4>, std::string> fills;  // (layer, head, query, key)
    for (const Element* map : svg.all("g", "map")) {
        const Element& cells = map->group(css_class);
        const int cols = std::stoi(cells.get("data-cols"));
        for (size_t n = 0; n < cells.children.size(); ++n)
            fills[{std::stoi(map->get("data-layer")), std::stoi(map->get("data-head")), static_cast<int>(n) / cols,
                   static_cast<int>(n) % cols}] = cells.children[n]->get("fill");
    }
    int compared = 0;
    for (const json& cell : shot.layout) {
        if (cell["view"] != view) continue;
        const std::array<int, 4> at = {cell["layer"], cell["head"], cell["query"], cell[column]};
        ASSERT_TRUE(fills.count(at)) << cell.dump();
        if (fills[at] == "url(#masked)") continue;
        const int x = static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2);
        const int y = static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2);
        EXPECT_EQ(shot.image.at(x, y), fill_rgb(fills[at])) << cell.dump();
        ++compared;
    }
    EXPECT_GT(compared, 0);
}

// The hatch: two greys (as the window's, tests/test_window.cpp), never a colormap colour.
void check_hatch(const Element& svg) {
    const std::vector<const Element*> patterns = svg.all("pattern");
    ASSERT_EQ(patterns.size(), 1u);
    EXPECT_EQ(patterns[0]->get("id"), "masked");
    std::set<int> greys;
    for (const auto& child : patterns[0]->children) {
        const std::array<int, 3> rgb = fill_rgb(child->get("fill"));
        EXPECT_TRUE(rgb[0] == rgb[1] && rgb[1] == rgb[2]) << child->get("fill");
        greys.insert(rgb[0]);
    }
    EXPECT_EQ(greys, (std::set<int>{41, 77}));
}

// The token labels along every map: the CLI's tokens as the window draws them.
void check_labels(const Element& svg, const json& cli) {
    const json& tokens = cli["tokens"][0];
    for (const Element* map : svg.all("g", "map"))
        for (const char* axis : {"queries", "keys"}) {
            const Element& labels = map->group(axis);
            ASSERT_EQ(labels.children.size(), tokens.size()) << axis;
            for (size_t t = 0; t < tokens.size(); ++t)
                EXPECT_EQ(labels.children[t]->text, visible_label(tokens[t].get<std::string>())) << axis << " " << t;
        }
}

// The legend's 64 steps: the viridis of their middles.
void check_legend(const Element& svg) {
    const Element& legend = svg.group("legend");
    std::vector<const Element*> steps;
    for (const auto& child : legend.children)
        if (child->name == "rect" && child->get("fill") != "url(#masked)") steps.push_back(child.get());
    ASSERT_EQ(steps.size(), 64u);
    for (size_t n = 0; n < steps.size(); ++n)
        EXPECT_TRUE(near(fill_rgb(steps[n]->get("fill")), test::viridis((n + 0.5) / 64))) << n;
}

// The title lines, joined by a line feed.
std::string heading(const Element& svg) {
    const Element& group = svg.group("heading");
    std::string lines;
    for (const auto& child : group.children) lines += (lines.empty() ? "" : "\n") + child->text;
    return lines;
}

TEST_F(SvgExport, HeadsTabHasEveryHeadOfTheLayerAsOnScreen) {
    const Export e = export_svg("heads", {"--layer", "1"}, {});
    ASSERT_TRUE(e.svg);
    EXPECT_EQ(e.svg->name, "svg");
    EXPECT_EQ(check_maps(*e.svg, e.cli, true), (std::set<std::pair<int, int>>{{1, 0}, {1, 1}, {1, 2}, {1, 3}}));
    check_against_screen(*e.svg, e.shot, "heads");
    check_hatch(*e.svg);
    check_labels(*e.svg, e.cli);
    check_legend(*e.svg);
    for (const Element* map : e.svg->all("g", "map")) {
        const Element& title = map->group("title");
        ASSERT_EQ(title.children.size(), 1u);
        EXPECT_EQ(title.children[0]->text.rfind("L1 H" + map->get("data-head"), 0), 0u) << title.children[0]->text;
    }
    const std::string line = heading(*e.svg);
    EXPECT_EQ(line.rfind("builtin", 0), 0u) << line;
    EXPECT_NE(line.find("\"" + visible_label(text) + "\""), std::string::npos) << line;
    EXPECT_NE(line.find("\nlayer 1   causal on, padding mask on, 4 heads of 32, scale head, split transpose, colormap "
                        "viridis"),
              std::string::npos)
        << line;
}

TEST_F(SvgExport, ModelTabHasEveryLayerAndHead) {
    const Export e = export_svg("model", {"--view", "model"}, {});
    ASSERT_TRUE(e.svg);
    std::set<std::pair<int, int>> all;
    for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 4; ++h) all.insert({l, h});
    EXPECT_EQ(check_maps(*e.svg, e.cli, true), all);
    check_against_screen(*e.svg, e.shot, "model");
    EXPECT_EQ(e.svg->group("layers").children.size(), 2u);
    EXPECT_EQ(e.svg->group("heads").children.size(), 4u);
    EXPECT_EQ(heading(*e.svg).find("layer"), std::string::npos);
}

TEST_F(SvgExport, LargeHeadWithoutTheCausalMask) {
    const Export e = export_svg("large", {"--head", "2"}, {"--causal", "off"});
    ASSERT_TRUE(e.svg);
    EXPECT_EQ(check_maps(*e.svg, e.cli, false), (std::set<std::pair<int, int>>{{0, 2}}));
    check_against_screen(*e.svg, e.shot, "large");
    check_labels(*e.svg, e.cli);
    EXPECT_NE(heading(*e.svg).find("causal off"), std::string::npos);
}

// Each cell the viridis of the CLI's top-1 lens probability, with that
// token in it (dark above 0.6, as the window draws it), the text's tokens
// above the columns.
TEST_F(SvgExport, LensTabHasEveryLayersTopToken) {
    const Export e = export_svg("lens", {"--view", "lens"}, {}, {"--logit-lens"});
    ASSERT_TRUE(e.svg);
    const json& lens = e.cli["lens"];
    const size_t L = lens.size(), length = e.cli["tokens"][0].size();
    ASSERT_EQ(L, 2u);
    const Element& cells = e.svg->group("cells");
    EXPECT_EQ(cells.get("data-rows"), std::to_string(L));
    EXPECT_EQ(cells.get("data-cols"), std::to_string(length));
    const Element& predictions = e.svg->group("predictions");
    ASSERT_EQ(cells.children.size(), L * length);
    ASSERT_EQ(predictions.children.size(), L * length);
    for (size_t l = 0; l < L; ++l)
        for (size_t t = 0; t < length; ++t) {
            const json& top = lens[l][0][t];
            const double p = top["p"];
            const size_t n = l * length + t;
            EXPECT_TRUE(near(fill_rgb(cells.children[n]->get("fill")), test::viridis(p)))
                << "layer " << l << " position " << t << ": " << cells.children[n]->get("fill") << " for p " << p;
            EXPECT_EQ(predictions.children[n]->text, visible_label(top["token"].get<std::string>()));
            EXPECT_EQ(predictions.children[n]->get("fill"), p > 0.6 ? "" : "#ffffff") << p;
        }
    const Element& positions = e.svg->group("positions");
    ASSERT_EQ(positions.children.size(), length);
    for (size_t t = 0; t < length; ++t)
        EXPECT_EQ(positions.children[t]->text, visible_label(e.cli["tokens"][0][t].get<std::string>()));
    EXPECT_EQ(e.svg->group("layers").children.size(), L);
    check_legend(*e.svg);
}

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
    const json& tokens = e.cli["tokens"][0];
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
        EXPECT_EQ(texts[t]->text, visible_label(tokens[t].get<std::string>()));
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
