// The choice tables' words: joined for messages and help, looked up by parse.
#include "headscope/base/choices.h"

#include "headscope/base/error.h"

namespace headscope {

std::string join_words(const char* const* words, size_t count, std::string_view separator) {
    std::string joined;
    for (size_t i = 0; i < count; ++i) {
        if (i > 0) joined += separator;
        joined += words[i];
    }
    return joined;
}

size_t word_index(std::string_view option, const char* const* words, size_t count, std::string_view word) {
    for (size_t i = 0; i < count; ++i)
        if (word == words[i]) return i;
    throw Error(std::string(option) + " '" + std::string(word) + "' is not one of " + join_words(words, count, ", "));
}

}  // namespace headscope
