// The local stores of GGUF models other programs keep: Ollama's, LM Studio's
// and llama.cpp's cache (model_stores.cpp), and what the model finder
// (model_paths.cpp) shares with them. Private to core/src/model.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

namespace headscope {

// An environment variable's value, "" when unset.
std::string env_var(const char* name);

// $HOME, else the user's home directory from the password database.
std::filesystem::path home_dir();

// Whether `name` has the form of a name in one of the stores (which the
// stores' parts of a path are checked to be: plain names, no "..").
bool is_gguf_store_name(const std::string& name);

// The GGUF file `name` names in Ollama's store, LM Studio's folders or
// llama.cpp's cache, asked in that order; nullopt when none holds it.
// Throws Error naming the entry when a store holds the name but its entry is
// wrong (a broken manifest, a missing blob, a folder of several models).
std::optional<std::filesystem::path> find_in_gguf_stores(const std::string& name);

// Where find_in_gguf_stores looks, for a message: "Ollama's store (<dir>),
// LM Studio's (<dir> or <dir>) or llama.cpp's cache (<dir>)".
std::string gguf_store_places();

}  // namespace headscope
