// The only code that calls SentencePiece (C++): the C functions of tokenizer_spm.h over
// sentencepiece::SentencePieceTrainer and sentencepiece::SentencePieceProcessor. Each catches
// every exception, so none crosses into the C code above it.
#include "tokenizer_spm.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

struct rp_spm {
    sentencepiece::SentencePieceProcessor sp;
};

namespace {

void put_err(char *err, size_t errcap, const char *msg)
{
    if (err == nullptr || errcap == 0) return;
    std::snprintf(err, errcap, "%s", msg ? msg : "");
}

// The library's message without its source position: "./src/x.cc(580) [cond] text" -> "text"
// (the condition only when there is no text).
void put_status(char *err, size_t errcap, const sentencepiece::util::Status &st)
{
    std::string m = st.message() ? st.message() : "";
    if (m.rfind("./src/", 0) == 0 || m.rfind("src/", 0) == 0) {
        size_t open = m.find(") [");
        size_t close = open == std::string::npos ? std::string::npos : m.find("] ", open);
        if (close != std::string::npos) {
            std::string text = m.substr(close + 2);
            m = text.find_first_not_of(" \n") != std::string::npos
                    ? text
                    : "the check " + m.substr(open + 3, close - open - 3) + " failed";
        }
    }
    while (!m.empty() && (m.back() == ' ' || m.back() == '\n')) m.pop_back();
    if (m.empty()) m = "the library refused it (status " + std::to_string((int)st.code()) + ")";
    put_err(err, errcap, m.c_str());
}

// The lines of the texts, one after the other ('\n' separates them; no line is copied until the
// trainer asks for it).
class Lines : public sentencepiece::SentenceIterator {
  public:
    Lines(const rp_spm_text *texts, size_t n) : texts_(texts), n_(n) { Fetch(); }
    bool done() const override { return t_ >= n_; }
    void Next() override { Fetch(); }
    const std::string &value() const override { return line_; }
    sentencepiece::util::Status status() const override { return {}; }

  private:
    // Moves to the next line: line_ is it, or done() when no text has one left.
    void Fetch()
    {
        while (t_ < n_) {
            const rp_spm_text &t = texts_[t_];
            if (pos_ < t.len) {
                const char *start = t.data + pos_;
                const void *nl = std::memchr(start, '\n', t.len - pos_);
                size_t end = nl ? (size_t)((const char *)nl - t.data) : t.len;
                line_.assign(start, end - pos_);
                pos_ = nl ? end + 1 : t.len;
                return;
            }
            t_++;
            pos_ = 0;
        }
        line_.clear();
    }
    const rp_spm_text *texts_;
    size_t n_, t_ = 0, pos_ = 0;
    std::string line_;
};

template <typename F> int guarded(char *err, size_t errcap, F f)
{
    try {
        return f();
    } catch (const std::bad_alloc &) {
        put_err(err, errcap, "out of memory");
        return RP_SPM_NOMEM;
    } catch (const std::exception &e) {
        put_err(err, errcap, e.what());
        return RP_SPM_FAIL;
    } catch (...) {
        put_err(err, errcap, "an unknown C++ exception");
        return RP_SPM_FAIL;
    }
}

} // namespace

extern "C" int rp_spm_train(const char *const *keys, const char *const *values, size_t nopts,
                            const rp_spm_text *texts, size_t ntexts, char **model,
                            size_t *model_len, char *err, size_t errcap)
{
    *model = nullptr;
    *model_len = 0;
    return guarded(err, errcap, [&]() -> int {
        std::unordered_map<std::string, std::string> kw;
        for (size_t i = 0; i < nopts; i++) kw[keys[i]] = values[i];
        kw["minloglevel"] = "2"; // errors only: the rest comes back as the status
        Lines lines(texts, ntexts);
        std::string out;
        auto st = sentencepiece::SentencePieceTrainer::Train(kw, &lines, &out);
        if (!st.ok()) {
            put_status(err, errcap, st);
            return RP_SPM_FAIL;
        }
        char *buf = (char *)std::malloc(out.size() ? out.size() : 1);
        if (buf == nullptr) throw std::bad_alloc();
        std::memcpy(buf, out.data(), out.size());
        *model = buf;
        *model_len = out.size();
        return RP_SPM_OK;
    });
}

extern "C" int rp_spm_load(const void *data, size_t len, rp_spm **out, char *err, size_t errcap)
{
    *out = nullptr;
    return guarded(err, errcap, [&]() -> int {
        rp_spm *s = new rp_spm();
        auto st = s->sp.LoadFromSerializedProto(
            absl::string_view(static_cast<const char *>(data), len));
        if (!st.ok()) {
            put_status(err, errcap, st);
            delete s;
            return RP_SPM_FAIL;
        }
        *out = s;
        return RP_SPM_OK;
    });
}

extern "C" void rp_spm_free(rp_spm *s) { delete s; }

extern "C" int rp_spm_size(const rp_spm *s) { return s->sp.GetPieceSize(); }
extern "C" int rp_spm_unk_id(const rp_spm *s) { return s->sp.unk_id(); }
extern "C" int rp_spm_bos_id(const rp_spm *s) { return s->sp.bos_id(); }
extern "C" int rp_spm_eos_id(const rp_spm *s) { return s->sp.eos_id(); }

extern "C" int rp_spm_encode(const rp_spm *s, const char *text, size_t len, int32_t *ids,
                             int64_t cap, int64_t *n, char *err, size_t errcap)
{
    *n = 0;
    return guarded(err, errcap, [&]() -> int {
        std::vector<int> v;
        auto st = s->sp.Encode(absl::string_view(text, len), &v);
        if (!st.ok()) {
            put_status(err, errcap, st);
            return RP_SPM_FAIL;
        }
        *n = (int64_t)v.size();
        for (int64_t i = 0; i < *n && i < cap; i++) ids[i] = (int32_t)v[(size_t)i];
        return RP_SPM_OK;
    });
}

extern "C" int rp_spm_decode(const rp_spm *s, const int32_t *ids, int64_t n, char *out,
                             size_t cap, size_t *len, char *err, size_t errcap)
{
    *len = 0;
    return guarded(err, errcap, [&]() -> int {
        std::vector<int> v(ids, ids + n);
        std::string text;
        auto st = s->sp.Decode(v, &text);
        if (!st.ok()) {
            put_status(err, errcap, st);
            return RP_SPM_FAIL;
        }
        *len = text.size();
        if (cap > 0) std::memcpy(out, text.data(), text.size() < cap ? text.size() : cap);
        return RP_SPM_OK;
    });
}

extern "C" const char *rp_spm_piece(const rp_spm *s, int id, size_t *len)
{
    try {
        const std::string &p = s->sp.IdToPiece(id);
        *len = p.size();
        return p.c_str();
    } catch (...) {
        *len = 0;
        return "";
    }
}

extern "C" int rp_spm_piece_id(const rp_spm *s, const char *piece, size_t len)
{
    try {
        return s->sp.PieceToId(absl::string_view(piece, len));
    } catch (...) {
        return s->sp.unk_id();
    }
}
