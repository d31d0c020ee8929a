// The example texts the window offers (assets/examples.json): each a batch
// of one or more texts and what to look for in it.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace headscope {

struct Example {
    std::string title;
    std::vector<std::string> texts;  // never empty
    std::string look_for;
};

// examples.json in the data folder (installation.h), or $HEADSCOPE_EXAMPLES
// where set; Error when there is no data folder.
std::filesystem::path examples_file();

// Throws Error naming the file and what is wrong with it.
std::vector<Example> read_examples(const std::filesystem::path& file);

// The example titled `title`; throws Error listing the titles there are.
const Example& find_example(const std::vector<Example>& examples, const std::string& title);

}  // namespace headscope
