// What one forward leaves for the next to reuse (a KV cache): each text's
// token ids, every layer's keys and values for them, and the result they gave.
// A forward handed a cache (Backend::forward) reuses, per text, the rows of
// the token prefix the new ids share with the cached ones (reusable_rows: all
// of them where the text only grew, else all but the last): it computes only
// the rows after them, copies the earlier rows of the maps, outputs and
// predictions, writes a long text's new rows of queries, keys and summaries
// in place among the kept ones (take_kept_rows), then leaves its own state in
// the cache. Reuse needs the same
// model and options, the causal mask on and the view + transpose split
// (prefix_reuse_refusal), and LongRoPE's factors on the same side of their
// switch length (long_rope: the cached keys were rotated with the other
// factors otherwise, and transformers' Phi-3 drops its cache there too);
// otherwise the forward computes everything and empties the cache. Typing a token at the end of a text, or generating
// one, then costs one token's work. Legend: L layers run, KVw = NKV * hs, T padded length.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "headscope/base/aligned.h"
#include "headscope/base/error.h"
#include "headscope/base/progress.h"
#include "headscope/compute/attention.h"

namespace headscope {

struct Model;

// A cache's lock, which a copy of the cache does not share (PrefixCache stays a value).
struct RowsLock {
    mutable std::shared_mutex mutex;
    RowsLock() = default;
    RowsLock(const RowsLock&) {}
    RowsLock& operator=(const RowsLock&) { return *this; }
};

struct PrefixCache {
    const Model* model = nullptr;  // what the cached forward ran on; null: empty
    AttentionOptions options;
    std::vector<std::vector<int32_t>> token_ids;   // (B, length_b): the cached texts
    std::vector<std::vector<int32_t>> source_ids;  // an encoder–decoder's sources: reuse needs the same
    // Per text: (L, capacity, 2 KVw), each layer's rows [K | V] of its tokens
    // (keys after RoPE and qk-norm), for at least its length.
    std::vector<AlignedVector<float>> kv;
    int capacity = 0;        // rows per layer in kv: a text's length and a tenth more
    int layers = 0;          // the layers of kv that hold the cached texts' rows: those the cached forward ran
    AttentionResult result;  // the cached forward's, less its kept rows (those are `kept`)
    // Whether `result` ends where token_ids do (its last logits are theirs);
    // false once a forward stopped part way (keep_rows).
    bool whole = true;
    // The latest forward's kept rows (attention.h's KeptRows), shared with the
    // results it gave; each result keeps its own copy of its last rows
    // (held_rows), which a keystroke rewrites in place (BPE changed the last
    // token, a deletion) while the window still shows it (take_kept_rows).
    std::shared_ptr<KeptRows> kept;
    // Another thread may read the cached rows (copy_cached_rows: the window's
    // lens reads the live forward's): the forward that fills the cache holds
    // the lock while it cuts its tokens (keep_rows, clear), moves kv (grows
    // it) or hands its new state in, and writes its new rows unheld, past
    // the rows it kept, which no reader reads.
    RowsLock lock;
    // Where set (the window's live cache), a forward that would write rows a
    // result handed out still reads (an edit deeper than held_rows: a paste, a
    // deleted paragraph) calls it to ask the results' holders to let go of
    // them, and waits until they have, rather than taking a second set of kept
    // rows beside the one shown (take_kept_rows). Unset, it takes a second set.
    std::function<void()> ask_for_rows;

    // Forgets each text's tokens from rows[b] on, those a forward is about to
    // rewrite: the rest stays valid whether or not that forward completes, so
    // a keystroke cancelled by the next one leaves its prefix to the next.
    void keep_rows(const std::vector<int>& rows);

    // Forgets everything but ask_for_rows, and frees the memory (the texts
    // or the model changed for good).
    void clear() {
        std::unique_lock hold(lock.mutex);
        std::function<void()> ask = std::move(ask_for_rows);
        *this = PrefixCache{};
        ask_for_rows = std::move(ask);
    }
};

// Thrown by a forward that reads another's cache (ForwardRequest::cached_rows)
// once that cache no longer holds the rows it reads (a keystroke changed them).
struct RowsGone : Error {
    RowsGone() : Error("the cached rows read changed") {}
};

// Copies the keys and values of the first `rows` tokens of `ids` at `layer`
// from `cache` into `to` (rows x width floats, each [K | V]), under the
// cache's lock, where the cache holds them as a forward of `ids` (the first
// tokens of a text of `text_length`) with `options` on `model` computes
// them: the same model and keys and values (same_keys_and_values), the layer
// run, a text that starts with those tokens, and LongRoPE's factors on the
// same side of their switch. False where it does not (nothing copied).
bool copy_cached_rows(const PrefixCache& cache, const Model& model, const AttentionOptions& options,
                      const std::vector<int32_t>& ids, int rows, int text_length, int layer, int width, float* to);

// Why a forward with `options` can reuse no prefix ("" when it can): with the
// causal mask off every row sees every later token, and with the naive-view
// split every head mixes tokens.
std::string prefix_reuse_refusal(const AttentionOptions& options);

// The rows of `ids` that a cache of the text `cached` supplies. Where `ids`
// only appends to `cached` and the cache is `whole`, all of it: the cached
// forward's last logits score the first new token. Otherwise the tokens they share but the last, whose row
// is computed again so that its prediction scores the new next token (BPE may
// change a text's last token as a character is typed).
int reusable_rows(const std::vector<int32_t>& cached, const std::vector<int32_t>& ids, bool whole);

// The kept rows of `shape` a forward of texts padded to T writes into,
// text b's rows from begin[b] on, the rows before them already there; null
// where the shape keeps nothing. Without a cache, new rows of T. With one,
// the cache's own where no result reads the rows to be written (only the
// cache holds them, or every text's rows from begin[b] are past what the
// results handed out read: KeptRows::covered; or the cache's ask_for_rows
// had the results let go of them, waiting while `progress` lets it), else a
// new set of rows with room to type into (a tenth more, at most max_rows; 0:
// no limit), the reused rows copied once. Shared rows are never written where
// a result reads them: the window's worker types on while its view draws the
// last result.
std::shared_ptr<KeptRows> take_kept_rows(PrefixCache* cache, const KeptRows::Shape& shape,
                                         const std::vector<int>& begin, int T, int max_rows,
                                         const Progress& progress = {});

// Hands `kept`, as a forward of the texts `ids` left them, to `result`
// (through a prefix cache): the result's own copy of each text's rows from
// held_rows before its end (AttentionResult::tail), and the rows before that
// counted as read (KeptRows::covered), so that the next keystroke may write
// from there in place.
void hand_out_kept_rows(KeptRows& kept, const std::vector<std::vector<int32_t>>& ids, AttentionResult& result);

}  // namespace headscope
