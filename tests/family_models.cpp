// Test support: family checkpoints with GPT-2's vocabulary; see family_models.h.
#include "family_models.h"

#include <stdexcept>

namespace headscope::test {

namespace fs = std::filesystem;

void write_family_model(const fs::path& dir, FamilySpec spec) {
    spec.vocab_size = 50304;  // GPT-2's 50257 ids, in Pythia's rows
    spec.bos_id = 50256;
    spec.eos_ids = {50256};
    spec.pad_token_id = -1;
    write_family_checkpoint(dir, make_family_checkpoint(spec));
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) fs::remove(dir / file);
    fs::copy_file(gpt2_vocab_json(), dir / "vocab.json", fs::copy_options::overwrite_existing);
    fs::copy_file(gpt2_merges_txt(), dir / "merges.txt", fs::copy_options::overwrite_existing);
}

FamilySpec family_variant(const std::string& name) {
    for (const FamilyVariant& variant : family_variants())
        if (variant.name == name) return variant.spec;
    throw std::invalid_argument("no family variant " + name);
}

}  // namespace headscope::test
