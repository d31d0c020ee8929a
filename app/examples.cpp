#include "examples.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/io/installation.h"
#include "headscope/io/json_input.h"

namespace headscope {

std::filesystem::path examples_file() {
    const char* override_file = std::getenv("HEADSCOPE_EXAMPLES");
    return override_file && *override_file ? override_file : data_dir() / "examples.json";
}

std::vector<Example> read_examples(const std::filesystem::path& file) {
    const nlohmann::json list = parse_json(read_file(file, "the examples"), file.string());
    std::vector<Example> examples;
    try {
        if (!list.is_array()) throw Error("not a list but " + describe_json(list));
        for (const nlohmann::json& entry : list) {
            Example example{entry.at("title"), entry.at("texts"), entry.value("look_for", "")};
            if (example.texts.empty()) throw Error("example '" + example.title + "' has no texts");
            examples.push_back(std::move(example));
        }
    } catch (const std::exception& e) {  // nlohmann's type errors, and ours
        throw Error(file.string() + ": not a list of examples (title, texts, look_for): " + e.what());
    }
    return examples;
}

const Example& find_example(const std::vector<Example>& examples, const std::string& title) {
    std::string titles;
    for (const Example& example : examples) {
        if (example.title == title) return example;
        titles += (titles.empty() ? "'" : ", '") + example.title + "'";
    }
    throw Error("no example titled '" + title + "'; there are " + (titles.empty() ? "none" : titles));
}

}  // namespace headscope
