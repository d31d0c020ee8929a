// Every result says which device computed it, never the backend chosen: a
// backend double computes its odd forwards on a device of its own and falls
// back to the CPU, saying why, on the even ones. The live forward, a
// generation's steps, the head probes, the session (what the status bar
// shows) and the JSON export each report the device of the forward that made
// them, and the reason: the fallback's, else the backend pick's.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "headscope/compute/backend.h"
#include "headscope/compute/generate.h"
#include "headscope/compute/live.h"
#include "headscope/inspect/probes.h"
#include "model_writer.h"
#include "process.h"
#include "session/session.h"
#include "views/status_bar.h"

namespace headscope {
namespace {

using namespace std::chrono_literals;

constexpr const char* fallback_reason = "the double falls back on every other forward";

class AlternatingBackend final : public Backend {
public:
    std::string name() const override { return "double"; }
    void load_weights(const Model& model) override { cpu_->load_weights(model); }
    void forward(const Batch& batch, const AttentionOptions& options, AttentionResult& result, PrefixCache* cache,
                 const Progress& progress) override {
        cpu_->forward(batch, options, result, cache, progress);
        if (++forwards_ % 2 == 1)
            result.computed_on = {"double", ""};
        else
            result.computed_on.fallback = fallback_reason;  // the CPU's result, as a fallback
    }

private:
    std::unique_ptr<Backend> cpu_ = make_cpu_backend();
    int forwards_ = 0;
};

LoadedModel on_the_double() {
    LoadedModel loaded = load_with_backend(builtin_model, BackendChoice::cpu);
    loaded.backend = std::make_unique<AlternatingBackend>();
    loaded.backend->load_weights(*loaded.model);
    loaded.backend_reason = "the double chosen";
    return loaded;
}

void expect_on_the_double(const ComputedOn& on) {
    EXPECT_EQ(on.device, "double");
    EXPECT_EQ(on.fallback, "");
    EXPECT_EQ(device_reason(on, "the double chosen"), "the double chosen");
}

void expect_fallen_back(const ComputedOn& on) {
    EXPECT_EQ(on.device, "cpu");
    EXPECT_EQ(on.fallback, fallback_reason);
    EXPECT_EQ(device_reason(on, "the double chosen"), fallback_reason);
}

TEST(BackendReport, TheCpuSaysCpuWithoutAFallback) {
    const LoadedModel loaded = load_with_backend(builtin_model, BackendChoice::cpu);
    const LiveResult live = compute_live(*loaded.backend, *loaded.model, {{"The cat sat"}, {}});
    EXPECT_EQ(live.attention.computed_on.device, "cpu");
    EXPECT_EQ(live.attention.computed_on.fallback, "");
    EXPECT_EQ(device_reason(live.attention.computed_on, loaded.backend_reason), "cpu chosen");
}

TEST(BackendReport, LiveForwardsSayEachTheirDevice) {
    const LoadedModel loaded = on_the_double();
    PrefixCache cache;
    const LiveRequest request{{"The cat sat on the mat"}, {}};
    expect_on_the_double(compute_live(*loaded.backend, *loaded.model, request, &cache).attention.computed_on);
    expect_fallen_back(compute_live(*loaded.backend, *loaded.model, request, &cache).attention.computed_on);
    expect_on_the_double(compute_live(*loaded.backend, *loaded.model, request, &cache).attention.computed_on);
}

TEST(BackendReport, GenerationStepsSayEachTheirDevice) {
    const LoadedModel loaded = on_the_double();
    AttentionOptions options;
    options.top_k = 1;
    Generator generator(*loaded.backend, *loaded.model, loaded.model->tokenizer.encode("The cat"), options, {}, 4);
    expect_on_the_double(generator.result().computed_on);  // the prompt's forward
    expect_on_the_double(generator.generation().computed_on);
    expect_fallen_back(generator.step().computed_on);
    expect_on_the_double(generator.step().computed_on);
    expect_on_the_double(generator.result().computed_on);
    // Together, the generation says the step that fell back.
    expect_fallen_back(generator.generation().computed_on);
}

TEST(BackendReport, ProbesSayTheirLastForwardsDevice) {
    const LoadedModel loaded = on_the_double();
    const std::vector<int32_t> ids = loaded.model->tokenizer.encode("The cat sat on the mat");
    // One text and one induction run: two forwards, the second fallen back.
    expect_fallen_back(probe_heads(*loaded.backend, *loaded.model, {ids}, 1).computed_on);
}

// The session's shown maps, the status bar's note and the exported JSON.
TEST(BackendReport, TheSessionAndItsExportSayTheShownMapsDevice) {
    WindowState state{.texts = {"The cat sat on the mat"}};
    Session session(on_the_double(), state, [] {});
    const auto settle = [&] {
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (session.busy() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
        session.collect();
        ASSERT_EQ(session.message, "");
    };
    test::TempDir dir;
    const auto exported = [&] {
        export_json(session, dir.path / "attention.json");
        const nlohmann::json j = nlohmann::json::parse(test::read_file(dir.path / "attention.json"));
        return std::make_pair(j.at("backend").get<std::string>(), j.at("backend_reason").get<std::string>());
    };

    settle();
    expect_on_the_double(session.computed_on());
    EXPECT_EQ(device_note(session), "computed on double (the double chosen)");
    EXPECT_EQ(exported(), std::make_pair(std::string("double"), std::string("the double chosen")));

    state.texts = {"The cat sat on the mat because it was soft"};
    session.submit();
    settle();
    expect_fallen_back(session.computed_on());
    EXPECT_EQ(device_note(session), std::string("computed on cpu (") + fallback_reason + ")");
    EXPECT_EQ(exported(), std::make_pair(std::string("cpu"), std::string(fallback_reason)));
    EXPECT_EQ(session.backend().name(), "double");  // the backend chosen stays; the reports follow the result
}

}  // namespace
}  // namespace headscope
