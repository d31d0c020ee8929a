// Test support: the families' checkpoints (family_writer.h), each beside its
// family's real tokenizer, as the window and headscope-cli tests open them.
#pragma once
#include <filesystem>

#include "family_writer.h"

namespace headscope::test {

// `spec` (family_spec or a family_variants entry), written into `dir` by write_family_checkpoint.
void write_family_model(const std::filesystem::path& dir, const FamilySpec& spec);

// A family_variants entry by its name ("llama", "qwen3", "mistral", ...).
FamilySpec family_variant(const std::string& name);

}  // namespace headscope::test
