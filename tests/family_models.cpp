// Test support: family checkpoints for the window and CLI tests; see family_models.h.
#include "family_models.h"

#include <map>
#include <memory>
#include <stdexcept>

namespace headscope::test {

namespace fs = std::filesystem;

void write_family_model(const fs::path& dir, const FamilySpec& spec) {
    write_family_checkpoint(dir, make_family_checkpoint(spec));
}

FamilySpec family_variant(const std::string& name, Vocabulary vocabulary) {
    if (name == "gpt2") return family_spec(Family::gpt2, vocabulary);
    for (const FamilyVariant& variant : family_variants(vocabulary))
        if (variant.name == name) return variant.spec;
    throw std::invalid_argument("no family variant " + name);
}

const LoadedFamily& loaded_family(const std::string& key, const FamilySpec& spec) {
    static std::map<std::string, std::unique_ptr<LoadedFamily>> loaded;
    std::unique_ptr<LoadedFamily>& family = loaded[key];
    if (!family) {
        family = std::make_unique<LoadedFamily>();
        family->checkpoint = make_family_checkpoint(spec);
        write_family_checkpoint(family->dir.path, family->checkpoint);
        family->model = load_model(family->dir.path.string());
    }
    return *family;
}

}  // namespace headscope::test
