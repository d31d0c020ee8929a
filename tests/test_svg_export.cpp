// The window's vector export (Save SVG, --export-svg) read back with expat,
// an XML parser of its own: on the built-in model under Xvfb, every cell's
// fill against headscope-cli's weight through the tests' own viridis and
// against the window's own pixel for that cell, masked cells filled with
// the hatch, every token label against the CLI's token ids' bytes as the
// window writes them (a piece of a character as \\xNN).
// And the writer's escaping of arbitrary bytes against nlohmann's dump (the
// CLI's JSON), which replaces invalid UTF-8 the same way. The reading of the
// SVG (svg_export_test.h) is here; test_svg_export_maps.cpp has more figures.
#include <expat.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "headscope/io/svg.h"
#include "headscope/model/model.h"
#include "svg_export_test.h"

using namespace headscope;
using nlohmann::json;

namespace headscope::test::svg {

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

std::string visible_label(const std::string& bytes) {
    std::string out;
    for (size_t i = 0; i < bytes.size(); ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        // A whole character: a lead byte and as many continuation bytes as it says.
        const size_t length = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : c >> 3 == 30 ? 4 : 0;
        bool whole = length > 0 && i + length <= bytes.size();
        for (size_t k = 1; whole && k < length; ++k) whole = (static_cast<unsigned char>(bytes[i + k]) >> 6) == 2;
        if (c == '\n' || c == '\r' || c == '\t') {
            out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t";
        } else if (!whole || c < 0x20 || c == 0x7f) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02X", c);
            out += escaped;
        } else {
            out += bytes.substr(i, length);
            i += length - 1;
        }
    }
    return xml_readable(out);
}

std::string token_label(int32_t id) {
    static const Tokenizer tokenizer = load_model(builtin_model).tokenizer;
    return visible_label(token_text(tokenizer, id));
}
std::array<int, 3> fill_rgb(const std::string& fill) {
    EXPECT_EQ(fill.size(), 7u) << fill;
    EXPECT_EQ(fill[0], '#') << fill;
    const long value = std::stol(fill.substr(1), nullptr, 16);
    return {static_cast<int>(value >> 16), static_cast<int>(value >> 8 & 0xFF), static_cast<int>(value & 0xFF)};
}

bool near(const std::array<int, 3>& got, const std::array<double, 3>& want) { return test::near(got, want, 1.0); }

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

void check_against_screen(const Element& svg, const test::WindowShot& shot, const std::string& view,
                          const std::string& css_class, const std::string& column) {
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

void check_labels(const Element& svg, const json& cli) {
    const json& tokens = cli["token_ids"][0];
    for (const Element* map : svg.all("g", "map"))
        for (const char* axis : {"queries", "keys"}) {
            const Element& labels = map->group(axis);
            ASSERT_EQ(labels.children.size(), tokens.size()) << axis;
            for (size_t t = 0; t < tokens.size(); ++t)
                EXPECT_EQ(labels.children[t]->text, token_label(tokens[t])) << axis << " " << t;
        }
}

void check_legend(const Element& svg) {
    const Element& legend = svg.group("legend");
    std::vector<const Element*> steps;
    for (const auto& child : legend.children)
        if (child->name == "rect" && child->get("fill") != "url(#masked)") steps.push_back(child.get());
    ASSERT_EQ(steps.size(), 64u);
    for (size_t n = 0; n < steps.size(); ++n)
        EXPECT_TRUE(near(fill_rgb(steps[n]->get("fill")), test::viridis((n + 0.5) / 64))) << n;
}

std::string heading(const Element& svg) {
    const Element& group = svg.group("heading");
    std::string lines;
    for (const auto& child : group.children) lines += (lines.empty() ? "" : "\n") + child->text;
    return lines;
}

}  // namespace headscope::test::svg

namespace {

using namespace headscope::test::svg;

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
            EXPECT_EQ(predictions.children[n]->text, token_label(top["id"]));
            EXPECT_EQ(predictions.children[n]->get("fill"), p > 0.6 ? "" : "#ffffff") << p;
        }
    const Element& positions = e.svg->group("positions");
    ASSERT_EQ(positions.children.size(), length);
    for (size_t t = 0; t < length; ++t) EXPECT_EQ(positions.children[t]->text, token_label(e.cli["token_ids"][0][t]));
    EXPECT_EQ(e.svg->group("layers").children.size(), L);
    check_legend(*e.svg);
}

}  // namespace
