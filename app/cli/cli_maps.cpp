// headscope-cli attention's long texts: see cli_maps.h.
#include "cli/cli_maps.h"

#include <string>
#include <tuple>

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "state/word_option.h"

namespace headscope {

CliOptions with_text_files(const CliOptions& opt) {
    CliOptions with = opt;
    for (const std::string& path : opt.text_files) with.texts.push_back(read_file(path, "--text-file"));
    return with;
}

MapsRequest maps_request(const CliOptions& opt) {
    MapsRequest request;
    if (opt.maps != "full" && opt.maps != "none") throw Error("--maps: expected full or none, got '" + opt.maps + "'");
    request.none = opt.maps == "none";
    request.rows_given = !opt.rows.empty(), request.cols_given = !opt.cols.empty();
    if (request.rows_given) parse_range("--rows", opt.rows, request.region.row_begin, request.region.row_end);
    if (request.cols_given) parse_range("--cols", opt.cols, request.region.col_begin, request.region.col_end);
    if (opt.pool < 0 || (opt.pool == 0 && opt.pool_given))
        throw Error("--pool: a map is pooled to at least 1 x 1 cells, not " + std::to_string(opt.pool));
    request.pool = opt.pool;
    request.pool_mode = opt.pool_mode;
    if (opt.pool_mode_given && !request.pool) throw Error("--pool-mode needs --pool N");
    if (request.pool && (request.rows_given || request.cols_given))
        throw Error("--pool pools whole maps: it does not go with --rows or --cols");
    if (request.none && request.on_demand())
        throw Error("--maps none writes no maps: it does not go with --rows, --cols or --pool");
    if (opt.contributions && request.forward_maps() != Maps::full)
        throw Error("--contributions needs every map: it does not go with --maps none, --rows, --cols or --pool");
    return request;
}

MapRegion region_for(const MapsRequest& request, int T) {
    MapRegion region = request.region;
    if (!request.rows_given) region.row_begin = 0, region.row_end = T;
    if (!request.cols_given) region.col_begin = 0, region.col_end = T;
    for (const auto& [flag, first, end] : {std::tuple{"--rows", region.row_begin, region.row_end},
                                           std::tuple{"--cols", region.col_begin, region.col_end}})
        if (end > T)
            throw Error(std::string(flag) + " " + std::to_string(first) + ":" + std::to_string(end) +
                        " reaches past the texts' " + std::to_string(T) + " positions");
    return region;
}

std::optional<MapsOnDemand> maps_on_demand(const MapsRequest& request, const KeptForward& kept,
                                           nlohmann::ordered_json& metadata) {
    if (!request.on_demand()) return std::nullopt;
    if (request.pool) return pooled_on_demand(kept, request.pool, request.pool_mode, metadata);
    return region_on_demand(kept, region_for(request, kept.result.T), metadata);
}

}  // namespace headscope
