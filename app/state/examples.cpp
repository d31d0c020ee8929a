// The examples file, read through JsonFields: see examples.h.
#include "state/examples.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/io/installation.h"
#include "headscope/io/json_fields.h"
#include "headscope/io/json_input.h"

namespace headscope {

std::filesystem::path examples_file() {
    const char* override_file = std::getenv("HEADSCOPE_EXAMPLES");
    return override_file && *override_file ? override_file : data_dir() / "examples.json";
}

std::vector<Example> read_examples(const std::filesystem::path& file) {
    // The shipped file has 6 KB; a user's own may have many more examples.
    const nlohmann::json list = read_json_file(file, {4 << 20, 1 << 18}, "the examples");
    const JsonFields f(file.string() + ": not a list of examples (title, texts, look_for)");
    if (!list.is_array()) f.fail("", "it is " + describe_json(list));
    std::vector<Example> examples;
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string field = JsonFields::at("", i);
        Example example{f.string(list[i], field, "title"), {}, f.string(list[i], field, "look_for", "")};
        const nlohmann::json& texts = f.required(list[i], field, "texts", nlohmann::json::value_t::array, "an array");
        for (size_t t = 0; t < texts.size(); ++t) {
            if (!texts[t].is_string())
                f.fail(JsonFields::at(field + ".texts", t), "expected a string, got " + describe_json(texts[t]));
            example.texts.push_back(texts[t].get<std::string>());
        }
        if (example.texts.empty()) f.fail(field, "example '" + example.title + "' has no texts");
        examples.push_back(std::move(example));
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
