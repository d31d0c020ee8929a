// The house's floors: every #include of core/ and app/ parsed from the
// sources, each arrow checked to point down (or stay in its room) in the
// order docs/architecture.md gives: base, io, tokenize, model, compute,
// inspect, then app. core never includes app, GL, GLFW or ImGui.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path source_dir = fs::path(HEADSCOPE_TESTS_DIR).parent_path();

// The rooms from the floor up.
const std::vector<std::string> floors = {"base", "io", "tokenize", "model", "compute", "inspect", "app"};

int floor_of(const std::string& room) {
    const auto it = std::find(floors.begin(), floors.end(), room);
    return it == floors.end() ? -1 : static_cast<int>(it - floors.begin());
}

struct Include {
    std::string target;  // as written between the quotes or brackets
    bool quoted;
};

std::vector<Include> includes_of(const fs::path& file) {
    std::ifstream in(file);
    std::vector<Include> found;
    const std::regex include(R"(^\s*#\s*include\s*([<"])([^">]+)[">])");
    std::smatch m;
    for (std::string line; std::getline(in, line);)
        if (std::regex_search(line, m, include)) found.push_back({m[2].str(), m[1].str() == "\""});
    return found;
}

// The room a file of core/ is in: its folder under core/src or core/include/headscope.
std::string core_room(const fs::path& file) {
    const fs::path relative = fs::relative(file, source_dir / "core");
    auto part = relative.begin();
    ++part;                                                          // "src" or "include"
    if (*part == "headscope") ++part;                                // include/headscope/<room>
    return std::next(part) == relative.end() ? "" : part->string();  // "" for a file outside any room
}

// The room a quoted include of `file` lands in, "" where it is none of ours.
std::string target_room(const fs::path& file, const std::string& target, bool in_core) {
    if (target.starts_with("headscope/")) {
        const fs::path path(target);
        return std::distance(path.begin(), path.end()) == 3 ? std::next(path.begin())->string() : "";
    }
    const fs::path beside = file.parent_path() / target;
    if (!fs::exists(beside)) return "";
    return in_core ? core_room(fs::canonical(beside)) : "app";
}

std::vector<fs::path> sources_under(const fs::path& dir) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        const std::string ext = entry.path().extension().string();
        if (entry.is_regular_file() && (ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh"))
            files.push_back(entry.path());
    }
    return files;
}

TEST(Rooms, EveryCoreFileIsInARoom) {
    const std::vector<fs::path> files = sources_under(source_dir / "core");
    ASSERT_GT(files.size(), 40u);
    std::map<std::string, int> per_room;
    for (const fs::path& file : files) {
        const std::string room = core_room(file);
        EXPECT_GE(floor_of(room), 0) << file << " is in no room of " << testing::PrintToString(floors);
        ++per_room[room];
    }
    EXPECT_GE(per_room.size(), 4u);
}

// What is wrong with `file`'s includes, a line each, counting its arrows
// between rooms in `arrows`. `file` is in `room`, of core or not (app).
std::vector<std::string> wrong_includes(const fs::path& file, const std::string& room, bool in_core, int& arrows) {
    std::vector<std::string> wrong;
    for (const Include& include : includes_of(file)) {
        if (in_core)
            for (const char* banned : {"GL/", "GLFW/", "imgui", "backends/imgui"})
                if (include.target.starts_with(banned))
                    wrong.push_back(file.string() + " includes " + include.target +
                                    ": core never includes GL or ImGui");
        // "headscope/..." names a room between quotes or brackets alike; a bracketed other is a library's.
        if (!include.quoted && !include.target.starts_with("headscope/")) continue;
        const std::string to = target_room(file, include.target, in_core);
        if (to.empty()) continue;
        ++arrows;
        if (floor_of(to) > floor_of(room))
            wrong.push_back(file.string() + " (" + room + ") includes " + include.target + " (" + to + "): it climbs");
    }
    return wrong;
}

TEST(Rooms, IncludesOnlyPointDown) {
    int arrows = 0;
    for (const char* top : {"core", "app"}) {
        const bool in_core = std::string(top) == "core";
        for (const fs::path& file : sources_under(source_dir / top))
            for (const std::string& wrong : wrong_includes(file, in_core ? core_room(file) : "app", in_core, arrows))
                ADD_FAILURE() << wrong;
    }
    EXPECT_GT(arrows, 100);  // the parse found the includes at all
}

// The check sees what it is for: an io file that includes compute (quoted or
// bracketed) or ImGui, and an app header included from core.
TEST(Rooms, ClimbingArrowsAreSeen) {
    const fs::path dir = fs::temp_directory_path() / ("headscope-rooms-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path file = dir / "planted.cpp";
    std::ofstream(file) << "#include \"headscope/base/error.h\"\n"
                           "#include \"headscope/compute/backend.h\"\n"
                           "#include <headscope/inspect/dance.h>\n"
                           "#include <imgui.h>\n";
    int arrows = 0;
    const std::vector<std::string> wrong = wrong_includes(file, "io", true, arrows);
    fs::remove_all(dir);
    EXPECT_EQ(arrows, 3);
    ASSERT_EQ(wrong.size(), 3u) << testing::PrintToString(wrong);
    EXPECT_NE(wrong[0].find("headscope/compute/backend.h (compute): it climbs"), std::string::npos) << wrong[0];
    EXPECT_NE(wrong[1].find("headscope/inspect/dance.h (inspect): it climbs"), std::string::npos) << wrong[1];
    EXPECT_NE(wrong[2].find("imgui.h: core never includes GL or ImGui"), std::string::npos) << wrong[2];
    EXPECT_EQ(target_room(source_dir / "core/src/tokenize/tokenizer.cpp", "pattern.h", true), "tokenize");
}

}  // namespace
