// The window's command line: its options, and what the window starts with
// (the saved settings with every option given in their place, the model).
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "session/session.h"
#include "state/forward_options.h"
#include "state/settings.h"
#include "state/view.h"

namespace CLI {
class App;  // CLI11's, declared here so that only the files that parse include CLI11
}  // namespace CLI

namespace headscope {

// The options as given; those that override the saved settings only when given (start_settings).
struct Args {
    std::string model = builtin_model;
    std::vector<std::string> texts;
    std::vector<std::string> text_files;                  // each file's text after the --text ones
    std::vector<std::string> text_pairs;                  // an encoder's second texts, one for each text
    std::vector<std::string> targets;                     // an encoder–decoder's targets, one for each text
    AttentionKind attention_kind = AttentionKind::cross;  // an encoder–decoder's maps shown
    std::string example;                                  // an example's title: its texts
    View view = View::heads;
    AttentionOptions options;    // the masks, head count, scale and split
    bool sliding_window = true;  // the model's own sliding window, when it has one
    Colormap colormap = Colormap::viridis;
    BackendChoice backend = BackendChoice::automatic;
    int layer = 0, head = -1, dance_step = 1, frames = 3;
    std::string rows, cols;   // a long text's map region shown (--rows, --cols: FIRST:END)
    MapRegion region;         // read from them (finish_args); empty: the whole map
    int query = -1;           // the query row the predictions panel shows; -1: the last token
    std::string window_size;  // WxH, as parse_window_size reads it
    std::string screenshot, layout, open_model, export_json, export_npy, export_svg;
    std::string screenshot_views_words;  // --screenshot-views as given: V,V,... or all
    std::vector<View> screenshot_views;  // read from it (finish_args): the tabs shot in turn; empty: the one shown
    bool every_view = false;             // all: every tab the model has (a dense model's skips the router)
    bool frame_times = false;
    double idle_seconds = 0;    // --count-idle-frames
    bool heads_given = false;   // --heads was given (else the head count is the saved one, or the model's)
    bool causal_given = false;  // --causal was given (else the mask is the model's own, or the saved one)
    AblationWords ablation;     // --ablate and --ablate-expert: heads and experts knocked out at the start
    bool hide_first_key = false, value_weighted = false;  // the maps' shading at the start
    Sentences sentences = Sentences::all;                 // the pair filter at the start
    bool compute_effects = false;                         // compute the effects grid at the start
    EffectsOf effects_of = EffectsOf::heads;              // of each head or each expert
    bool effects_all_exact = false;                       // every cell of the effects grid exact
    std::string compare_text;                             // the "compare with" text
    std::string compare_target;                           // an encoder-decoder's compare text's target
    std::string compare_pair;                             // an encoder's compare text's pair's second text
    bool diff = false;                                    // the maps drawn as the compare text's less the text's
    bool compute_patching = false;                        // patch the text and the compare text at the start
    PatchMethod patch_method = PatchMethod::exact;        // by which method
    PatchStack patch_stack = PatchStack::decoder;         // an encoder-decoder's grids shown
    bool patch_stack_given = false;                       // --patch-stack was given (else the saved one)
    bool settings = true;  // read and save settings; off unless given when a test drives the window
};

// "1920x1080" as {1920, 1080}; throws Error naming the text unless both
// are whole numbers from 320 to 16384.
std::array<int, 2> parse_window_size(std::string_view text);

// Adds the options to `cli`; after cli.parse, finish_args (which throws
// Error for --export-svg of a view without a figure).
void add_window_options(CLI::App& cli, Args& args);
void finish_args(const CLI::App& cli, Args& args);

// The saved settings (when `use_saved`) with every option given on the command line in their place.
Settings start_settings(const Args& args, const CLI::App& cli, bool use_saved);

// Before any window opens: throws Error unless --heads is a count `model`
// accepts (a saved count it refuses is dropped, with a warning), --layer,
// --head and --ablate name layers and heads of the model split so,
// --ablate-expert experts of its mixtures (each layer keeping k), --view
// router and --effects-of experts a model with experts, and --query is a position of the first text.
void check_start_choices(const Args& args, Settings& start, const Model& model);

// A bad --model is fatal; a saved model that no longer loads gives way to the
// built-in one. The load's progress goes to stderr when it is a terminal (the
// window is not open yet).
LoadedModel load_start_model(const Settings& start, bool model_given, BackendChoice backend);

}  // namespace headscope
