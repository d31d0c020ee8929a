// Marian's tokenizer, as transformers' MarianTokenizer has it: SentencePiece
// models, source.spm for the source text and target.spm for the target, read
// and run by libsentencepiece (the reference implementation); their pieces
// are numbered by vocab.json, which both sides share, a piece it lacks being
// <unk>; a language code (">>fr<<") that starts a text is one token, and
// every text ends with </s>.
#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include "charsmap.h"
#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/tokenize/tokenizer.h"
#include "tokenizer_internal.h"

namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}

namespace headscope {

namespace fs = std::filesystem;

struct Tokenizer::SentencePieceModels {
    sentencepiece::SentencePieceProcessor source, target;
};

namespace {

// opus-mt's models have about 800 KB; a model of a million pieces, 30 MB.
constexpr size_t max_model_bytes = 64 << 20;

// Calls visit(field, payload, whole) for each field of a protobuf message
// (the wire format): payload the bytes of a length-delimited field (empty
// for the others), whole the field's bytes with its key. Throws Error on
// bytes that are not the wire format.
template <typename Visit>
void for_each_field(std::string_view message, Visit&& visit) {
    auto fail = [] { throw Error("its protobuf encoding is broken"); };
    auto varint = [&](std::string_view& in) {
        uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (in.empty()) fail();
            const auto byte = static_cast<uint8_t>(in.front());
            in.remove_prefix(1);
            value |= uint64_t{byte & 0x7Fu} << shift;
            if (!(byte & 0x80)) return value;
        }
        fail();
        return value;
    };
    for (std::string_view in = message; !in.empty();) {
        const char* start = in.data();
        const uint64_t key = varint(in);
        const uint64_t field = key >> 3, wire = key & 7;
        std::string_view payload;
        if (wire == 0) {
            varint(in);
        } else if (wire == 1 || wire == 5) {
            const size_t size = wire == 1 ? 8 : 4;
            if (in.size() < size) fail();
            in.remove_prefix(size);
        } else if (wire == 2) {
            const uint64_t size = varint(in);
            if (size > in.size()) fail();
            payload = in.substr(0, size);
            in.remove_prefix(size);
        } else {
            fail();  // groups: no SentencePiece message has them
        }
        visit(field, payload, std::string_view(start, static_cast<size_t>(in.data() - start)));
    }
}

// ModelProto's fields (sentencepiece_model.proto): its pieces, each a
// SentencePiece whose field 1 is the piece; its normalizer_spec, whose field
// 2 is the precompiled_charsmap; its self_test_data.
constexpr uint64_t pieces_field = 1, normalizer_field = 3, self_test_field = 4, charsmap_field = 2;

// The bytes of a model's normalizer_spec.precompiled_charsmap (a later
// occurrence wins, as protobuf merges them); empty when it has none.
std::string_view precompiled_charsmap(std::string_view model) {
    std::string_view charsmap;
    for_each_field(model, [&](uint64_t field, std::string_view payload, std::string_view) {
        if (field != normalizer_field) return;
        for_each_field(payload, [&](uint64_t inner, std::string_view bytes, std::string_view) {
            if (inner == charsmap_field) charsmap = bytes;
        });
    });
    return charsmap;
}

// A piece this long is no word piece (a trained model's are at most 16
// characters); libsentencepiece's trie builder recurses once a byte of it,
// and its encoder walks each from every position of the text.
constexpr size_t max_piece_bytes = 1024;

// The model as libsentencepiece may take it: without its self-test samples,
// which it would run while loading (a million characters of them hang it);
// Error naming a piece too long.
std::string model_to_load(std::string_view model) {
    std::string kept;
    for_each_field(model, [&](uint64_t field, std::string_view payload, std::string_view whole) {
        if (field == self_test_field) return;
        if (field == pieces_field)
            for_each_field(payload, [&](uint64_t inner, std::string_view piece, std::string_view) {
                if (inner == 1 && piece.size() > max_piece_bytes)
                    throw Error("a piece of " + std::to_string(piece.size()) + " bytes, over the " +
                                std::to_string(max_piece_bytes) + " Headscope reads");
            });
        kept += whole;
    });
    return kept;
}

void load_model(sentencepiece::SentencePieceProcessor& model, const fs::path& file) {
    if (path_kind(file) == PathKind::missing)
        throw Error(file.string() + ": missing (a Marian checkpoint has source.spm and target.spm)");
    const std::string bytes = read_file(file, "the SentencePiece model", max_model_bytes);
    // Its own messages would come before Headscope's line: the library's
    // switch for them (exported, though not in its public header), FATAL only.
    sentencepiece::logging::SetMinLogLevel(3);
    std::string problem;
    try {
        if (!charsmap_is_safe(precompiled_charsmap(bytes))) {
            problem = "its normalization rules, precompiled_charsmap, are malformed";
        } else if (const auto status = model.LoadFromSerializedProto(model_to_load(bytes)); !status.ok()) {
            problem = status.ToString();
        }
    } catch (const std::exception& e) {  // ours, or its trie builder's on some malformed models (an empty piece)
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
    const auto separate = settings.is_object() ? settings.find("separate_vocabs") : settings.end();
    // Python reads any value but these as true.
    if (separate != settings.end() && !separate->is_null() && *separate != false)
        throw Error(config.string() + ": separate_vocabs " + describe_json(*separate) +
                    ": a Marian target vocabulary of its own (target_vocab.json) is not supported");
}

// The id of `symbol` in `ids` (a Tokenizer's SymbolIds), `missing` when it has none.
template <typename Ids>
int32_t id_or(const Ids& ids, std::string_view symbol, int32_t missing) {
    const auto it = ids.find(symbol);
    return it == ids.end() ? missing : it->second;
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
    auto id_of = [&](const char* token) { return id_or(tokenizer.symbol_ids_, token, -1); };
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
    auto id_of = [&](std::string_view piece) { return id_or(symbol_ids_, piece, unk_id_); };
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
        throw Error(std::string(side == Side::source ? "source.spm" : "target.spm") + " cannot encode this text (" +
                    status.ToString() + ")");
    for (const std::string& piece : pieces) ids.push_back(id_of(piece));
}

}  // namespace headscope
