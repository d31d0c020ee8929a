// The window's progress of long work (app/job_progress.h): shown only once a
// compute has run 300 ms (a load's at once), with the time it has left, only
// the newest job's, cancelled at the job's next
// report; and a model load cancelled in the session, which keeps the open
// model and says so.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "model_writer.h"
#include "session/job_progress.h"
#include "session/session.h"

using namespace headscope;
using namespace std::chrono_literals;

namespace {

// The time left at the pace of the steps so far: a quarter done after t
// seconds leaves 3 t; none before a step is done, none once the last is.
TEST(JobProgress, TimeLeftAtThePaceOfTheStepsDone) {
    JobProgress job;
    const auto started = std::chrono::steady_clock::now();
    job.start();
    const Progress report = job.reporter({});
    report({"computing layers", 0, 4, ProgressUnit::steps});
    EXPECT_FALSE(job.seconds_left());
    std::this_thread::sleep_for(100ms);
    report({"computing layers", 1, 4, ProgressUnit::steps});
    const std::optional<double> left = job.seconds_left();
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - started;
    ASSERT_TRUE(left);
    EXPECT_GE(*left, 3 * 0.1);
    EXPECT_LE(*left, 3 * spent.count());
    report({"computing layers", 4, 4, ProgressUnit::steps});
    EXPECT_FALSE(job.seconds_left());
}

TEST(JobProgress, ShownAfterThreeHundredMsOrAtOnceAndOnlyTheNewestJobs) {
    JobProgress job;
    const auto started = std::chrono::steady_clock::now();
    job.start();
    const Progress older = job.reporter({});
    older({"reading the weights", 1, 4, ProgressUnit::bytes});
    const std::optional<ProgressReport> early = job.shown();
    if (std::chrono::steady_clock::now() - started < JobProgress::long_work) {
        EXPECT_FALSE(early);  // unless this machine stalled that long
    }
    std::this_thread::sleep_for(JobProgress::long_work);
    ASSERT_TRUE(job.shown());
    EXPECT_EQ(progress_text(*job.shown()), "reading the weights: 0.0 of 0.0 MB");

    // A newer job: what the older one still says is dropped.
    std::stop_source stop;
    job.start();
    const Progress newer = job.reporter(stop.get_token());
    newer({"scoring heads", 2, 40, ProgressUnit::steps});
    older({"reading the weights", 3, 4, ProgressUnit::bytes});
    std::this_thread::sleep_for(JobProgress::long_work);
    ASSERT_TRUE(job.shown());
    EXPECT_EQ(progress_text(*job.shown()), "scoring heads: 2 of 40");

    // A load's progress shows at once.
    JobProgress at_once(0ms);
    at_once.start();
    at_once.reporter({})({"reading the weights", 0, 4, ProgressUnit::bytes});
    EXPECT_TRUE(at_once.shown());

    // Cancel, or a stop (a newer request, the window closing): the next report throws.
    EXPECT_FALSE(job.cancelled());
    job.cancel();
    EXPECT_TRUE(job.cancelled());
    EXPECT_THROW(newer({"scoring heads", 3, 40, ProgressUnit::steps}), Cancelled);
    job.start();
    EXPECT_FALSE(job.cancelled());
    const Progress stopped = job.reporter(stop.get_token());
    stop.request_stop();
    EXPECT_THROW(stopped({"scoring heads", 0, 40, ProgressUnit::steps}), Cancelled);
}

// Collects until the session's load has answered.
void wait_for_load(Session& session) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!session.loading().empty() && std::chrono::steady_clock::now() < deadline) {
        session.collect();
        std::this_thread::sleep_for(10ms);
    }
    ASSERT_TRUE(session.loading().empty()) << "the load did not answer in 60 s";
}

TEST(SessionProgress, ACancelledLoadKeepsTheOpenModelAndSaysSo) {
    test::TempDir dir;
    // Larger than the built-in model: 20 MB of weights to read, against its 4.
    test::write_test_model(dir.path, {.n_layer = 4, .n_head = 4, .n_embd = 96, .n_positions = 64});
    WindowState state{.texts = {"The cat sat on the mat"}};
    Session session(load_with_backend(builtin_model, BackendChoice::cpu), state, [] {});
    ASSERT_NE(session.model().config.n_embd, 96);

    // Cancelled before its first report, nothing of it is kept. A busy
    // machine may let a load finish before the cancel reaches it: then the
    // other model is opened and cancelled (100 tries).
    bool cancelled = false;
    for (int attempt = 0; attempt < 100 && !cancelled; ++attempt) {
        const std::string open = session.model_name();
        const int open_embd = session.model().config.n_embd;
        const std::string other = open == builtin_model ? dir.path.string() : builtin_model;
        session.open_model(other);
        session.load_progress().cancel();
        wait_for_load(session);
        cancelled = session.model_name() == open;
        if (!cancelled) continue;
        EXPECT_EQ(session.model().config.n_embd, open_embd);
        EXPECT_EQ(session.model_message, "cancelled opening " + other + "; " + open + " stays open");
    }
    EXPECT_TRUE(cancelled) << "no load was cancelled in 100 tries";

    // Not cancelled, it opens.
    const std::string other = session.model_name() == builtin_model ? dir.path.string() : builtin_model;
    session.open_model(other);
    wait_for_load(session);
    EXPECT_EQ(session.model_name(), other);
    EXPECT_EQ(session.model_message, "");
}

// A live compute cancelled (the status bar's Cancel): the last maps stay,
// the session says so, and the next change computes again.
TEST(SessionProgress, ACancelledComputeKeepsTheLastMapsAndSaysSo) {
    WindowState state{.texts = {"The cat sat on the mat"}};
    Session session(load_with_backend(builtin_model, BackendChoice::cpu), state, [] {});
    const auto settle = [&] {
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (session.busy() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
        session.collect();
    };
    settle();
    ASSERT_EQ(session.message, "");

    // The worker may finish a compute this small before the cancel reaches
    // it: new texts until one is cancelled (each computes; 100 tries).
    bool cancelled = false;
    for (int attempt = 0; attempt < 100 && !cancelled; ++attempt) {
        const uint64_t shown = session.shown_generation;
        const std::vector<std::string> shown_texts = session.shown_texts;
        state.texts = {"The cat sat on the mat because it was soft " + std::to_string(attempt)};
        session.submit();
        session.live_progress().cancel();
        settle();
        if (session.message.empty()) continue;  // computed before the cancel
        cancelled = true;
        EXPECT_EQ(session.message, "computing cancelled");
        EXPECT_EQ(session.shown_generation, shown);
        EXPECT_EQ(session.shown_texts, shown_texts);
    }
    ASSERT_TRUE(cancelled) << "no compute was cancelled in 100 tries";

    session.submit();
    settle();
    EXPECT_EQ(session.message, "");
    EXPECT_EQ(session.shown_texts, state.texts);
}

}  // namespace
