// Aligned text tables: see terminal_table.h.
#include "cli/terminal_table.h"

#include <algorithm>

#include "headscope/inspect/attention_export.h"

namespace headscope {

namespace {

// The display width of UTF-8 text: its code points.
size_t text_width(const std::string& text) {
    return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xc0) != 0x80; }));
}

}  // namespace

std::string text_table(const TableRows& rows) {
    std::vector<size_t> widths;
    for (const auto& row : rows) {
        widths.resize(std::max(widths.size(), row.size()));
        for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], text_width(row[c]));
    }
    std::string text;
    for (const auto& row : rows) {
        std::string line;
        for (size_t c = 0; c < row.size(); ++c) {
            line += row[c];
            if (c + 1 < row.size()) line += std::string(widths[c] - text_width(row[c]) + 2, ' ');
        }
        text += line + '\n';
    }
    return text;
}

void add_fields(const nlohmann::ordered_json& object, const std::string& prefix, TableRows& rows) {
    for (const auto& [name, value] : object.items()) {
        if (value.is_object())
            add_fields(value, prefix + name + ".", rows);
        else
            rows.push_back({prefix + name, value.is_string() ? value.get<std::string>() : dump_json(value)});
    }
}

}  // namespace headscope
