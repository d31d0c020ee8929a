// Test support: the families' checkpoints (family_writer.h), each beside its
// family's real tokenizer, as the window and headscope-cli tests open them.
#pragma once
#include <filesystem>
#include <string>

#include "family_writer.h"
#include "headscope/model/model.h"

namespace headscope::test {

// `spec` (family_spec or a family_variants entry), written into `dir` by write_family_checkpoint.
void write_family_model(const std::filesystem::path& dir, const FamilySpec& spec);

// A family_variants entry by its name ("llama", "qwen3", "mistral", ...,
// or "gpt2"), by default with its whole tokenizer: as a user's checkpoint,
// for programs given text.
FamilySpec family_variant(const std::string& name, Vocabulary vocabulary = Vocabulary::whole);

// `spec`'s checkpoint as written and loaded, made once per program for each
// `key` (a test parameter's name): a parameterized suite's tests of one
// parameter share it and only read it, instead of each drawing, writing and
// loading it again (a 128k-token tokenizer and embedding each time).
struct LoadedFamily {
    TempDir dir;
    FamilyCheckpoint checkpoint;
    Model model;
};
const LoadedFamily& loaded_family(const std::string& key, const FamilySpec& spec);

}  // namespace headscope::test
