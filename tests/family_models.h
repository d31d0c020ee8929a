// Test support: the families' checkpoints (family_writer.h) as the window and
// headscope-cli open them on this branch: GPT-2's vocab.json and merges.txt
// stand in for the family's tokenizer.json, which the loader does not read
// yet. The views test shapes, masks and weights, whichever tokenizer split
// the text; the vocabulary is sized for GPT-2's ids, and <|endoftext|> is
// the model's BOS, EOS and pad.
#pragma once
#include <filesystem>

#include "family_writer.h"

namespace headscope::test {

// `spec` (family_spec or a family_variants entry) with GPT-2's vocabulary,
// written into `dir` by write_family_checkpoint.
void write_family_model(const std::filesystem::path& dir, FamilySpec spec);

// A family_variants entry by its name ("llama", "qwen3", "mistral", ...).
FamilySpec family_variant(const std::string& name);

}  // namespace headscope::test
