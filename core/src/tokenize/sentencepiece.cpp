// Marian's tokenizer, as transformers' MarianTokenizer has it: SentencePiece
// models, source.spm for the source text and target.spm for the target, read
// and run by libsentencepiece (the reference implementation); their pieces
// are numbered by vocab.json, which both sides share, a piece it lacks being
// <unk>; a language code (">>fr<<") that starts a text is one token, and
// every text ends with </s>.
#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/tokenize/tokenizer.h"
#include "tokenizer_internal.h"

namespace headscope {

namespace fs = std::filesystem;

struct Tokenizer::SentencePieceModels {
    sentencepiece::SentencePieceProcessor source, target;
};

namespace {

// opus-mt's models have about 800 KB; a model of a million pieces, 30 MB.
constexpr size_t max_model_bytes = 64 << 20;

void load_model(sentencepiece::SentencePieceProcessor& model, const fs::path& file) {
    if (path_kind(file) == PathKind::missing)
        throw Error(file.string() + ": missing (a Marian checkpoint has source.spm and target.spm)");
    const std::string bytes = read_file(file, "the SentencePiece model", max_model_bytes);
    std::string problem;
    try {
        if (const auto status = model.LoadFromSerializedProto(bytes); !status.ok()) problem = status.ToString();
    } catch (const std::exception& e) {  // its trie builder throws on some malformed models (an empty piece)
        problem = e.what();
    }
    if (!problem.empty()) throw Error(file.string() + ": not a SentencePiece model (" + problem + ")");
}

// transformers' separate_vocabs numbers the target's pieces by a vocab of
// their own, which token_bytes cannot follow.
void refuse_separate_vocabularies(const fs::path& dir) {
    const fs::path config = dir / "tokenizer_config.json";
    if (path_kind(config) == PathKind::missing) return;
    const nlohmann::json settings = read_json_file(config, {1 << 20, 1 << 16}, "the tokenizer's settings");
    if (settings.is_object() && settings.value("separate_vocabs", false) == true)
        throw Error(config.string() +
                    ": separate_vocabs: a Marian target vocabulary of its own (target_vocab.json) is not supported");
}

}  // namespace

Tokenizer Tokenizer::load_marian(const fs::path& dir) {
    refuse_separate_vocabularies(dir);
    auto models = std::make_shared<SentencePieceModels>();
    load_model(models->source, dir / "source.spm");
    load_model(models->target, dir / "target.spm");

    Tokenizer tokenizer;
    tokenizer.sentencepiece_ = std::move(models);
    const fs::path vocab_file = dir / "vocab.json";
    const std::string vocab_name = vocab_file.string();
    const nlohmann::json vocab = read_json_file(vocab_file, vocab_limits, "the vocabulary");
    tokenizer.id_to_bytes_.resize(vocab.size());
    for_each_dense_id(vocab, vocab_name, [&](const std::string& piece, int32_t id) {
        tokenizer.symbol_ids_.emplace(piece, id);
        tokenizer.id_to_bytes_[static_cast<size_t>(id)] = replace_all(piece, "\xE2\x96\x81", " ");  // ▁ as a space
    });
    auto id_of = [&](const char* token) {
        const auto it = tokenizer.symbol_ids_.find(std::string_view(token));
        return it == tokenizer.symbol_ids_.end() ? -1 : it->second;
    };
    tokenizer.unk_id_ = id_of("<unk>");
    const int32_t eos = id_of("</s>");
    if (tokenizer.unk_id_ < 0 || eos < 0) throw Error(vocab_name + ": Marian's vocabulary needs <unk> and </s>");
    // MarianTokenizer's special tokens, found in the text as it comes.
    for (const char* special : {"</s>", "<unk>", "<pad>"}) {
        if (const int32_t id = id_of(special); id >= 0) {
            tokenizer.id_to_bytes_[static_cast<size_t>(id)] = special;
            tokenizer.added_.add(special, {id, false, false, false});
        }
    }
    tokenizer.post_.single = {{-1, 0, 0}, {eos, 0, 0}};
    return tokenizer;
}

void Tokenizer::sentencepiece_section(std::string_view text, Side side, std::vector<int32_t>& ids) const {
    auto id_of = [&](std::string_view piece) {
        const auto it = symbol_ids_.find(piece);
        return it == symbol_ids_.end() ? unk_id_ : it->second;
    };
    if (text.starts_with(">>")) {
        if (const size_t end = text.find("<<"); end != std::string_view::npos) {
            ids.push_back(id_of(text.substr(0, end + 2)));
            text.remove_prefix(end + 2);
        }
    }
    const sentencepiece::SentencePieceProcessor& model =
        side == Side::source ? sentencepiece_->source : sentencepiece_->target;
    std::vector<std::string> pieces;
    if (const auto status = model.Encode(text, &pieces); !status.ok())
        throw Error("the SentencePiece model cannot encode this text (" + status.ToString() + ")");
    for (const std::string& piece : pieces) ids.push_back(id_of(piece));
}

}  // namespace headscope
