// headscope-cli heads: each head scored by core's probes (probes.h) on the
// given text or core's validation windows, as a table or JSON.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_commands.h"
#include "cli/terminal_progress.h"
#include "cli/terminal_table.h"
#include "headscope/base/error.h"
#include "headscope/inspect/attention_export.h"
#include "headscope/inspect/probes.h"

namespace headscope {
namespace {

// Token windows to score heads on: --text, else core's validation windows.
std::vector<std::vector<int32_t>> probe_texts(const Model& model, const CliOptions& opt) {
    if (!opt.texts.empty()) {
        std::vector<std::vector<int32_t>> ids = model.tokenizer.encode_texts(opt.texts);
        if (ids.front().size() < 2) throw Error("--text needs at least 2 tokens to score heads");
        if (ids.front().size() > static_cast<size_t>(model.config.n_positions))
            throw Error("text 1 has " + std::to_string(ids.front().size()) +
                        " tokens, more than the model's limit of " + std::to_string(model.config.n_positions));
        return ids;
    }
    return validation_windows(model);
}

// The probe columns of heads' table; the strongest head of each is marked *.
struct ProbeColumn {
    const char* name;
    double HeadScores::*score;
    bool marked;
};
constexpr ProbeColumn probe_columns[] = {{"previous_token", &HeadScores::previous_token, true},
                                         {"first_token", &HeadScores::first_token, true},
                                         {"current_token", &HeadScores::current_token, true},
                                         {"induction", &HeadScores::induction, true},
                                         {"entropy", &HeadScores::entropy, false}};

// The summary's fields, then one row per head with each score (4 decimals).
std::string heads_table(const Json& summary, const ProbeReport& report) {
    TableRows fields, rows = {{"layer", "head"}};
    add_fields(summary, "", fields);
    std::vector<size_t> strongest;  // per column, the head's index in report.heads
    for (const ProbeColumn& column : probe_columns) {
        rows.front().push_back(column.name);
        size_t best = 0;
        for (size_t i = 1; i < report.heads.size(); ++i)
            if (report.heads[i].*column.score > report.heads[best].*column.score) best = i;
        strongest.push_back(column.marked ? best : report.heads.size());
    }
    for (size_t i = 0; i < report.heads.size(); ++i) {
        std::vector<std::string> row = {std::to_string(i / report.n_head), std::to_string(i % report.n_head)};
        for (size_t c = 0; c < std::size(probe_columns); ++c) {
            char number[32];
            std::snprintf(number, sizeof number, "%.4f%s", report.heads[i].*probe_columns[c].score,
                          strongest[c] == i ? "*" : "");
            row.push_back(number);
        }
        rows.push_back(row);
    }
    return text_table(fields) + '\n' + text_table(rows) + "* the strongest head of each probe\n";
}

}  // namespace

void run_heads(const CliOptions& opt) {
    const bool table = as_table(opt);
    const LoadedModel loaded = open_on_backend(opt);
    const Model& model = *loaded.model;
    const ProbeReport report = [&] {
        TerminalProgress bar;
        return probe_heads(*loaded.backend, model, probe_texts(model, opt), 8, 42, bar.progress());
    }();
    const ComputedOn& on = report.computed_on;
    const Json summary = {{"backend", on.device},        {"backend_reason", device_reason(on, loaded.backend_reason)},
                          {"path", model.path.string()}, {"n_layer", report.n_layer},
                          {"n_head", report.n_head},     {"source", opt.texts.empty() ? "validation" : "text"},
                          {"rows", report.rows}};
    if (table) return write_output(opt.out, [&](std::ostream& out) { out << heads_table(summary, report); });
    // The summary's fields, then "heads" with one head per line, so that the
    // scores read well in a terminal.
    std::string text = dump_json(summary);
    text.pop_back();
    text += ",\"heads\":[";
    for (int l = 0; l < report.n_layer; ++l)
        for (int h = 0; h < report.n_head; ++h) {
            const HeadScores& s = report.head(l, h);
            const Json head = {{"layer", l},
                               {"head", h},
                               {"previous_token", s.previous_token},
                               {"first_token", s.first_token},
                               {"current_token", s.current_token},
                               {"induction", s.induction},
                               {"entropy", s.entropy}};
            text += (l || h ? ",\n " : "\n ") + dump_json(head);
        }
    text += "\n]}\n";
    write_output(opt.out, [&](std::ostream& out) { out << text; });
}

}  // namespace headscope
