// The post-processor's templates (tokenizer.h's Tokenizer::PostProcessor):
// read from tokenizer.json (or RoBERTa's, for its vocab.json and merges.txt),
// and applied to a text or a pair of texts.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "headscope/io/json_fields.h"
#include "headscope/io/json_input.h"
#include "headscope/tokenize/tokenizer.h"

namespace headscope {

namespace {

using json = nlohmann::json;
using Item = Tokenizer::PostProcessor::Item;

// A template of tokenizer.json's TemplateProcessing: its SpecialToken items
// (each one or more ids, from special_tokens) and Sequence items ("A" or
// "B"), each with its type_id. `texts` says which sequences it must have, once each.
std::vector<Item> read_template(const JsonFields& f, const json& value, const std::string& field, const char* key,
                                size_t id_bound, const std::string& texts) {
    const std::string template_field = JsonFields::join(field, key);
    const json& items = f.required(value, field, key, json::value_t::array, "an array");
    const json* special_tokens = f.optional(value, field, "special_tokens");
    std::vector<Item> out;
    std::string seen;
    for (size_t i = 0; i < items.size(); ++i) {
        const std::string item_field = JsonFields::at(template_field, i);
        const auto type_of = [&](const json& item, const std::string& where) {
            const json* type = f.optional(item, where, "type_id");
            if (type && (!type->is_number_unsigned() || type->get<uint64_t>() > 1))
                f.fail(where + ".type_id", describe_json(*type) + " is not 0 or 1");
            return static_cast<int8_t>(type ? type->get<int>() : 0);
        };
        if (const json* special = f.optional(items[i], item_field, "SpecialToken")) {
            const std::string where = item_field + ".SpecialToken";
            const std::string name = f.string(*special, where, "id");
            const std::string entry_field = JsonFields::join(field, "special_tokens") + "[" + describe_json(name) + "]";
            const json* entry =
                special_tokens ? f.optional(*special_tokens, JsonFields::join(field, "special_tokens"), name.c_str())
                               : nullptr;
            if (!entry) f.fail(item_field, "special token " + describe_json(name) + " is not in special_tokens");
            const json& ids = f.required(*entry, entry_field, "ids", json::value_t::array, "an array");
            for (size_t k = 0; k < ids.size(); ++k)
                out.push_back(
                    {f.id(ids[k], JsonFields::at(entry_field + ".ids", k), id_bound), 0, type_of(*special, where)});
        } else if (const json* sequence = f.optional(items[i], item_field, "Sequence")) {
            const std::string where = item_field + ".Sequence";
            const std::string name = f.string(*sequence, where, "id");
            if (name.size() != 1 || texts.find(name[0]) == std::string::npos || seen.find(name[0]) != std::string::npos)
                f.fail(item_field, "the " + std::string(key) + " template's sequence " + describe_json(name) +
                                       " is not one of " + texts + " given once");
            seen += name;
            out.push_back({-1, static_cast<int8_t>(name[0] - 'A'), type_of(*sequence, where)});
        } else {
            f.fail(item_field, "expected a SpecialToken or a Sequence");
        }
    }
    if (seen.size() != texts.size()) f.fail(template_field, "lacks a sequence of " + texts);
    return out;
}

// A [token, id] pair of BertProcessing and RobertaProcessing.
int32_t special_id(const JsonFields& f, const json& value, const std::string& field, const char* key, size_t id_bound) {
    const json& pair = f.required(value, field, key, json::value_t::array, "an array");
    if (pair.size() != 2) f.fail(JsonFields::join(field, key), "expected [token, id]");
    return f.id(pair[1], JsonFields::at(JsonFields::join(field, key), 1), id_bound);
}

// `outer` with its first text replaced by `inner`: a later processor wraps the earlier one's output.
std::vector<Item> wrap(const std::vector<Item>& outer, const std::vector<Item>& inner) {
    std::vector<Item> out;
    for (const Item& item : outer) {
        if (item.id < 0 && item.sequence == 0)
            out.insert(out.end(), inner.begin(), inner.end());
        else
            out.push_back(item);
    }
    return out;
}

}  // namespace

void Tokenizer::PostProcessor::read(const JsonFields& f, const json& value, const std::string& field, size_t id_bound) {
    const std::string type = f.type(value, field);
    std::vector<Item> new_single, new_pair;
    if (type == "Sequence") {
        const json& list = f.required(value, field, "processors", json::value_t::array, "an array");
        for (size_t i = 0; i < list.size(); ++i) read(f, list[i], JsonFields::at(field + ".processors", i), id_bound);
        return;
    }
    if (type == "TemplateProcessing") {
        new_single = read_template(f, value, field, "single", id_bound, "A");
        if (const json* pair_template = f.optional(value, field, "pair");
            pair_template && !(pair_template->is_array() && pair_template->empty()))
            new_pair = read_template(f, value, field, "pair", id_bound, "AB");
    } else if (type == "BertProcessing") {  // [CLS] A [SEP], and [CLS] A [SEP] B [SEP] with B's part of type 1
        const int32_t cls = special_id(f, value, field, "cls", id_bound),
                      sep = special_id(f, value, field, "sep", id_bound);
        new_single = {{cls, 0, 0}, {-1, 0, 0}, {sep, 0, 0}};
        new_pair = {{cls, 0, 0}, {-1, 0, 0}, {sep, 0, 0}, {-1, 1, 1}, {sep, 0, 1}};
    } else if (type == "RobertaProcessing") {
        PostProcessor roberta_templates =
            roberta(special_id(f, value, field, "cls", id_bound), special_id(f, value, field, "sep", id_bound));
        new_single = std::move(roberta_templates.single);
        new_pair = std::move(roberta_templates.pair);
    } else if (type != "ByteLevel") {  // ByteLevel changes offsets only, never ids
        f.fail(field, "type " + describe_json(type) +
                          " is not supported (supported: ByteLevel, TemplateProcessing, BertProcessing, "
                          "RobertaProcessing, Sequence)");
    }
    if (!new_single.empty()) single = wrap(new_single, single);
    if (!new_pair.empty()) pair = std::move(new_pair);
}

Tokenizer::PostProcessor Tokenizer::PostProcessor::roberta(int32_t cls, int32_t sep) {  // RoBERTa has no types
    PostProcessor out;
    out.single = {{cls, 0, 0}, {-1, 0, 0}, {sep, 0, 0}};
    out.pair = {{cls, 0, 0}, {-1, 0, 0}, {sep, 0, 0}, {sep, 0, 0}, {-1, 1, 0}, {sep, 0, 0}};
    return out;
}

int Tokenizer::PostProcessor::apply(const std::vector<Item>& template_, const std::vector<int32_t>* ids[2],
                                    std::vector<int32_t>& out_ids, std::vector<int32_t>* out_types) {
    int second_start = -1;
    for (const Item& item : template_) {
        if (item.id < 0 && item.sequence == 1) second_start = static_cast<int>(out_ids.size());
        if (item.id >= 0)
            out_ids.push_back(item.id);
        else
            out_ids.insert(out_ids.end(), ids[item.sequence]->begin(), ids[item.sequence]->end());
        if (out_types) out_types->resize(out_ids.size(), item.type);
    }
    return second_start;
}

}  // namespace headscope
