// headscope-cli attention's long texts: --text-file's texts, and which maps
// the output holds (--maps, --rows and --cols, --pool and --pool-mode): the
// forward's every map, none, or a region or pooled maps computed on demand
// from the queries and keys it kept (attention_maps.h).
// Bad input throws Error naming the flag.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/cli_options.h"
#include "headscope/compute/attention_maps.h"
#include "headscope/inspect/attention_export.h"

namespace headscope {

// `opt` with each --text-file's text appended to its texts.
CliOptions with_text_files(const CliOptions& opt);

// The maps asked for, checked before the model loads.
struct MapsRequest {
    bool none = false;  // --maps none
    bool rows_given = false, cols_given = false;
    MapRegion region;  // --rows and --cols as given (the rest: filled in for the text)
    int pool = 0;      // --pool; 0: none
    Pooling pool_mode = Pooling::mean;
    bool on_demand() const { return rows_given || cols_given || pool > 0; }
    Maps forward_maps() const { return none ? Maps::none : on_demand() ? Maps::queries_and_keys : Maps::full; }
};
MapsRequest maps_request(const CliOptions& opt);

// The region --rows and --cols ask for in maps of T positions (all of them
// where one is not given); throws Error where it reaches past T.
MapRegion region_for(const MapsRequest& request, int T);

// The region or pooled maps asked for, from a forward that kept its queries
// and keys (none where the request is not on demand), their fields added to
// `metadata`: maps "region" with rows and cols [first, end), or "pooled"
// with pool {cells, step, mode}.
std::optional<MapsOnDemand> maps_on_demand(const MapsRequest& request, const KeptForward& kept,
                                           nlohmann::ordered_json& metadata);

}  // namespace headscope
