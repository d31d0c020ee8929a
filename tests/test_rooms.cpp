// The house's floors: every #include of core/ and app/ parsed from the
// sources, each arrow checked to point down (or stay in its room) in the
// order docs/architecture.md gives: core's base, io, tokenize, model,
// compute, inspect, then app's state, session beside cli, widgets, views,
// shell. Rooms on one floor do not include each other. core never includes
// app; core, state, session and cli never include GL, GLFW or ImGui.
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

// The rooms from the floor up, core's then app's; the rooms of a floor stand side by side.
const std::vector<std::vector<std::string>> floors = {{"base"},    {"io"},      {"tokenize"}, {"model"},
                                                      {"compute"}, {"inspect"}, {"state"},    {"session", "cli"},
                                                      {"widgets"}, {"views"},   {"shell"}};
const std::vector<std::string> app_rooms = {"state", "session", "cli", "widgets", "views", "shell"};
// The rooms that draw nothing: they never include GL, GLFW or ImGui (core's and these).
const std::vector<std::string> drawing_free_app_rooms = {"state", "session", "cli"};

int floor_of(const std::string& room) {
    for (size_t floor = 0; floor < floors.size(); ++floor)
        if (std::find(floors[floor].begin(), floors[floor].end(), room) != floors[floor].end())
            return static_cast<int>(floor);
    return -1;
}

bool is_app_room(const std::string& room) {
    return std::find(app_rooms.begin(), app_rooms.end(), room) != app_rooms.end();
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

// The room a file of app/ is in: its folder under app/ ("" for a file outside any room).
std::string app_room(const fs::path& file) {
    const fs::path relative = fs::relative(file, source_dir / "app");
    return std::next(relative.begin()) == relative.end() ? "" : relative.begin()->string();
}

// The room a quoted include of `file` lands in, "" where it is none of ours.
// app's includes name their room from app/ ("state/settings.h").
std::string target_room(const fs::path& file, const std::string& target, bool in_core) {
    if (target.starts_with("headscope/")) {
        const fs::path path(target);
        return std::distance(path.begin(), path.end()) == 3 ? std::next(path.begin())->string() : "";
    }
    const fs::path path(target);
    if (std::distance(path.begin(), path.end()) == 2 && is_app_room(path.begin()->string()))
        return path.begin()->string();
    const fs::path beside = file.parent_path() / target;
    if (!fs::exists(beside)) return "";
    return in_core ? core_room(fs::canonical(beside)) : app_room(fs::canonical(beside));
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

// How many files each room of `top` (core or app) holds; a file in none of its rooms fails.
std::map<std::string, int> files_per_room(const std::string& top) {
    const std::vector<fs::path> files = sources_under(source_dir / top);
    EXPECT_GT(files.size(), 40u);
    std::map<std::string, int> per_room;
    for (const fs::path& file : files) {
        const std::string room = top == "core" ? core_room(file) : app_room(file);
        EXPECT_TRUE(floor_of(room) >= 0 && is_app_room(room) == (top == "app"))
            << file << " is in no room of " << top << ": " << testing::PrintToString(floors);
        ++per_room[room];
    }
    return per_room;
}

TEST(Rooms, EveryCoreFileIsInARoom) { EXPECT_GE(files_per_room("core").size(), 4u); }

TEST(Rooms, EveryAppFileIsInARoom) { EXPECT_EQ(files_per_room("app").size(), app_rooms.size()); }

// What is wrong with `file`'s includes, a line each, counting its arrows
// between rooms in `arrows`. `file` is in `room`, of core or not (app).
std::vector<std::string> wrong_includes(const fs::path& file, const std::string& room, bool in_core, int& arrows) {
    std::vector<std::string> wrong;
    const bool draws_nothing = in_core || std::find(drawing_free_app_rooms.begin(), drawing_free_app_rooms.end(),
                                                    room) != drawing_free_app_rooms.end();
    for (const Include& include : includes_of(file)) {
        if (draws_nothing)
            for (const char* banned : {"GL/", "GLFW/", "imgui", "backends/imgui", "widgets/gl.h"})
                if (include.target.starts_with(banned))
                    wrong.push_back(file.string() + " (" + room + ") includes " + include.target +
                                    ": it never includes GL or ImGui");
        // "headscope/..." names a room between quotes or brackets alike; a bracketed other is a library's.
        if (!include.quoted && !include.target.starts_with("headscope/")) continue;
        const std::string to = target_room(file, include.target, in_core);
        if (to.empty()) continue;
        ++arrows;
        if (to == room) continue;
        if (floor_of(to) > floor_of(room))
            wrong.push_back(file.string() + " (" + room + ") includes " + include.target + " (" + to + "): it climbs");
        else if (floor_of(to) == floor_of(room))
            wrong.push_back(file.string() + " (" + room + ") includes " + include.target + " (" + to +
                            "): a room beside its own");
    }
    return wrong;
}

TEST(Rooms, IncludesOnlyPointDown) {
    int arrows = 0;
    for (const char* top : {"core", "app"}) {
        const bool in_core = std::string(top) == "core";
        for (const fs::path& file : sources_under(source_dir / top))
            for (const std::string& wrong :
                 wrong_includes(file, in_core ? core_room(file) : app_room(file), in_core, arrows))
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
    EXPECT_NE(wrong[2].find("imgui.h: it never includes GL or ImGui"), std::string::npos) << wrong[2];
    EXPECT_EQ(target_room(source_dir / "core/src/tokenize/tokenizer.cpp", "pattern.h", true), "tokenize");
}

// The brief's "no file over 450 lines", for every source of ours (the npm
// references' own sources under tests/reference are not).
TEST(Rooms, NoSourceFileIsOver450Lines) {
    std::vector<std::string> long_files;
    for (const char* top : {"core", "app", "tests", "tools"})
        for (const fs::path& file : sources_under(source_dir / top)) {
            if (file.string().find("node_modules") != std::string::npos) continue;
            std::ifstream in(file);
            int lines = 0;
            for (std::string line; std::getline(in, line);) ++lines;
            if (lines > 450)
                long_files.push_back(fs::relative(file, source_dir).string() + ": " + std::to_string(lines));
        }
    EXPECT_TRUE(long_files.empty()) << testing::PrintToString(long_files);
}

// And in app: a widget that includes a view, a CLI file that includes the
// session (beside it) or ImGui; a view's include of a widget and core is fine.
TEST(Rooms, ClimbingAppArrowsAreSeen) {
    const fs::path dir = fs::temp_directory_path() / ("headscope-app-rooms-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path widget = dir / "widget.cpp", cli = dir / "cli.cpp", view = dir / "view.cpp";
    std::ofstream(widget) << "#include \"state/settings.h\"\n#include \"views/heads_view.h\"\n";
    std::ofstream(cli) << "#include \"session/session.h\"\n#include <imgui.h>\n";
    std::ofstream(view) << "#include \"widgets/ui.h\"\n#include \"headscope/inspect/dance.h\"\n";
    int arrows = 0;
    const std::vector<std::string> widget_wrong = wrong_includes(widget, "widgets", false, arrows);
    const std::vector<std::string> cli_wrong = wrong_includes(cli, "cli", false, arrows);
    const std::vector<std::string> view_wrong = wrong_includes(view, "views", false, arrows);
    fs::remove_all(dir);
    EXPECT_EQ(arrows, 5);
    ASSERT_EQ(widget_wrong.size(), 1u) << testing::PrintToString(widget_wrong);
    EXPECT_NE(widget_wrong[0].find("views/heads_view.h (views): it climbs"), std::string::npos) << widget_wrong[0];
    ASSERT_EQ(cli_wrong.size(), 2u) << testing::PrintToString(cli_wrong);
    EXPECT_NE(cli_wrong[0].find("session/session.h (session): a room beside its own"), std::string::npos)
        << cli_wrong[0];
    EXPECT_NE(cli_wrong[1].find("imgui.h: it never includes GL or ImGui"), std::string::npos) << cli_wrong[1];
    EXPECT_TRUE(view_wrong.empty()) << testing::PrintToString(view_wrong);
    EXPECT_EQ(app_room(source_dir / "app/views/heads_view.cpp"), "views");
    EXPECT_EQ(target_room(source_dir / "app/views/heads_view.cpp", "heads_view.h", false), "views");
}

}  // namespace
