// Test support: family checkpoints for the window and CLI tests; see family_models.h.
#include "family_models.h"

#include <stdexcept>

namespace headscope::test {

namespace fs = std::filesystem;

void write_family_model(const fs::path& dir, const FamilySpec& spec) {
    write_family_checkpoint(dir, make_family_checkpoint(spec));
}

FamilySpec family_variant(const std::string& name) {
    for (const FamilyVariant& variant : family_variants())
        if (variant.name == name) return variant.spec;
    throw std::invalid_argument("no family variant " + name);
}

}  // namespace headscope::test
