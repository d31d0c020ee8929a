// Aligned text tables for a person at a terminal: headscope-cli's info and
// heads, when stdout is one.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace headscope {

using TableRows = std::vector<std::vector<std::string>>;

// Rows of cells as aligned columns: each column as wide as its widest cell
// (in code points), cells left-aligned, two spaces between, no trailing spaces.
std::string text_table(const TableRows& rows);

// An object's fields as "name  value" rows (strings without quotes), an
// object inside as "outer.name" rows.
void add_fields(const nlohmann::ordered_json& object, const std::string& prefix, TableRows& rows);

}  // namespace headscope
