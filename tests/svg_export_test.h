// The reading of the window's SVG export for test_svg_export's files
// (test_svg_export.cpp, test_svg_export_maps.cpp): the XML as a tree parsed
// by expat, the checks of its maps, hatch, labels and legend against the
// CLI and the screen, and the fixture that exports the built-in model's figures.
#pragma once
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model_writer.h"
#include "process.h"
#include "screenshot.h"

namespace headscope::test::svg {

using nlohmann::json;

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
std::unique_ptr<Element> parse_xml(const std::string& xml, std::string& error);
// What a reader of the XML gets for valid UTF-8 `text`: characters XML
// cannot hold (C0 controls, U+FFFE, U+FFFF) as U+FFFD.
std::string xml_readable(const std::string& text);
// Text as the window draws it (line feeds, carriage returns and tabs as
// \n, \r, \t; other control characters and each byte that starts no whole
// UTF-8 character as \xNN), as an XML reader gets it.
std::string visible_label(const std::string& bytes);
// The built-in model's token `id` so: its bytes (the CLI's JSON holds a
// piece of a character as U+FFFD), from the built-in tokenizer.
std::string token_label(int32_t id);

// The built-in model on a text with markup characters, quotes, a tab, a line
// feed, a control character and UTF-8 of 2, 3 and 4 bytes.
inline const std::string text =
    "Tom & Jerry <b>\"hi\" 'yo'\tx\ny\x01z caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80!";

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

    static inline test::TempDir* dir_ = nullptr;
};

// A fill "#rrggbb" as its red, green and blue.
std::array<int, 3> fill_rgb(const std::string& fill);
// Within 1 of `want` in every channel (the GPU rounds to 8 bits).
bool near(const std::array<int, 3>& got, const std::array<double, 3>& want);

// Every map's cells, row by row in their places: the viridis of the CLI's
// weight, or the hatch where `causal` hides the key. Returns the maps' (layer, head).
std::set<std::pair<int, int>> check_maps(const Element& svg, const json& cli, bool causal);
// The same bytes as on screen: at the centre of every visible cell the
// window drew in `view` (its --layout), the pixel is the SVG's fill (of the
// maps' <g class="css_class">, whose columns the layout names `column`).
void check_against_screen(const Element& svg, const WindowShot& shot, const std::string& view,
                          const std::string& css_class = "cells", const std::string& column = "key");
// The hatch: two greys (as the window's, tests/test_window.cpp), never a colormap colour.
void check_hatch(const Element& svg);
// The token labels along every map: the CLI's tokens as the window draws them.
void check_labels(const Element& svg, const json& cli);
// The legend's 64 steps: the viridis of their middles.
void check_legend(const Element& svg);
// The title lines, joined by a line feed.
std::string heading(const Element& svg);

}  // namespace headscope::test::svg
