// The options a user picks among a few named values (the scale, the split,
// the backend, the window's colormap): one table per enum, beside the enum,
// holding each value's word (on the command lines and in the settings file)
// and label (in the window's combo boxes), in enum order. C++17: the CUDA
// backend includes it.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace headscope {

// Value i of Enum (0..N-1) is words[i] and labels[i].
template <typename Enum, size_t N>
struct Choices {
    const char* option;     // what is chosen, in words, for errors: "scale"
    const char* words[N];   // "head": what the command lines and the settings file say
    const char* labels[N];  // "1/sqrt(d_head)": what the window shows; ImGui::Combo takes the array
};

// The `count` words joined: "head, model, none" for ", ", "head|model|none" for "|".
std::string join_words(const char* const* words, size_t count, std::string_view separator);

// The index of `word` among the `count` words; else throws Error
// "<option> '<word>' is not one of <words>".
size_t word_index(std::string_view option, const char* const* words, size_t count, std::string_view word);

template <typename Enum, size_t N>
Enum parse_choice(const Choices<Enum, N>& choices, std::string_view word) {
    return static_cast<Enum>(word_index(choices.option, choices.words, N, word));
}

template <typename Enum, size_t N>
std::string join_words(const Choices<Enum, N>& choices, std::string_view separator) {
    return join_words(choices.words, N, separator);
}

template <typename Enum, size_t N>
const char* word_of(const Choices<Enum, N>& choices, Enum value) {
    return choices.words[static_cast<size_t>(value)];
}

}  // namespace headscope
