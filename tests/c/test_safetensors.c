/* safetensors files (core/io/safetensors.h) and the JSON reader under them (core/io/json.h): the
 * reader's rules and messages, the config as JSON, model round trips, the files PyTorch made
 * (tests/fixtures/interop, README there: the weights give the reference logits), and every refusal
 * of a damaged or forged file with its exact message, the model untouched after each.
 */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
}


/* ---- the JSON reader -------------------------------------------------------------------------- */

static void json_fails(const char *text, const char *msg)
{
    rp_json_doc d;
    rp_status st = rp_json_parse(&d, text, strlen(text), 1000);
    CHECK(st == RP_ERR_ARG && strcmp(rp_last_error(), msg) == 0,
          "%s\n   got  (%d) \"%s\"\n   want \"%s\"", text, (int)st, rp_last_error(), msg);
    rp_json_free(&d);
}

static void test_json(void)
{
    const char *ok = " {\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"],"
                     " \"b\": {}, \"c\": [], \"\": 18446744073709551615, \"d\": -9223372036854775808} ";
    rp_json_doc d;
    if (CHECK_STATUS(rp_json_parse(&d, ok, strlen(ok), 0), RP_OK, NULL)) {
        size_t a = rp_json_get(&d, 0, "a");
        CHECK(a != RP_JSON_NONE && d.nodes[a].type == RP_JSON_ARRAY && d.nodes[a].count == 6,
              "array of 6");
        size_t s = d.nodes[a].first;
        for (int i = 0; i < 5; i++) s = d.nodes[s].next;
        CHECK(d.nodes[s].type == RP_JSON_STRING && d.nodes[s].str_len == 8 &&
                  memcmp(d.strings + d.nodes[s].str, "x\xc3\xa9\xf0\x9f\x98\x80\n", 8) == 0,
              "escapes decoded to UTF-8");
        double x = 0;
        CHECK(rp_json_double(&d, d.nodes[d.nodes[a].first].next, &x) == RP_OK && x == -2500.0,
              "-2.5e3");
        uint64_t u = 0;
        CHECK(rp_json_u64(&d, rp_json_get(&d, 0, ""), &u) == RP_OK && u == UINT64_MAX,
              "2^64 - 1 exactly");
        int64_t i64 = 0;
        CHECK(rp_json_i64(&d, rp_json_get(&d, 0, "d"), &i64) == RP_OK && i64 == INT64_MIN,
              "-2^63 exactly");
        CHECK(rp_json_u64(&d, rp_json_get(&d, 0, "d"), &u) == RP_ERR_RANGE &&
                  strcmp(rp_last_error(), "-9223372036854775808 is not an integer >= 0") == 0,
              "%s", rp_last_error());
        CHECK(rp_json_i64(&d, rp_json_get(&d, 0, ""), &i64) == RP_ERR_RANGE &&
                  strcmp(rp_last_error(), "18446744073709551615 is out of range") == 0,
              "%s", rp_last_error());
        CHECK(rp_json_get(&d, 0, "zz") == RP_JSON_NONE && rp_json_get(&d, a, "a") == RP_JSON_NONE,
              "missing keys");
    }
    rp_json_free(&d);
    const char *big = "[18446744073709551616, 1e400, 1.5]";
    if (CHECK_STATUS(rp_json_parse(&d, big, strlen(big), 0), RP_OK, NULL)) {
        uint64_t u;
        double x;
        size_t n0 = d.nodes[0].first, n1 = d.nodes[n0].next, n2 = d.nodes[n1].next;
        CHECK(rp_json_u64(&d, n0, &u) == RP_ERR_RANGE &&
                  strcmp(rp_last_error(), "18446744073709551616 is out of range") == 0, "%s",
              rp_last_error());
        CHECK(rp_json_double(&d, n1, &x) == RP_ERR_RANGE &&
                  strcmp(rp_last_error(), "1e400 is out of range") == 0, "%s", rp_last_error());
        CHECK(rp_json_u64(&d, n2, &u) == RP_ERR_RANGE &&
                  strcmp(rp_last_error(), "1.5 is not an integer >= 0") == 0, "%s", rp_last_error());
    }
    rp_json_free(&d);
    /* NUL inside a string comes with its length */
    if (CHECK_STATUS(rp_json_parse(&d, "\"a\\u0000b\"", 10, 0), RP_OK, NULL))
        CHECK(d.nodes[0].str_len == 3 && d.strings[d.nodes[0].str + 1] == '\0', "\\u0000 kept");
    rp_json_free(&d);

    json_fails("", "at byte 0: expected a value, got the end of the text");
    json_fails("{\"a\":1,}", "at byte 7: expected a string key in an object, got '}'");
    json_fails("[1,]", "at byte 3: expected a value, got ']'");
    json_fails("[1 2]", "at byte 3: expected ',' or ']' in an array, got '2'");
    json_fails("{\"a\" 1}", "at byte 5: expected ':' after an object key, got '1'");
    json_fails("{\"a\":1} x", "at byte 8: expected the end of the text after the value, got 'x'");
    json_fails("[01]", "at byte 1: invalid number (leading zero)");
    json_fails("[1.]", "at byte 1: invalid number (no digit after '.')");
    json_fails("[1e]", "at byte 1: invalid number (no digit in the exponent)");
    json_fails("[-]", "at byte 1: invalid number");
    json_fails("[+1]", "at byte 1: expected a value, got '+'");
    json_fails("[NaN]", "at byte 1: expected a value, got 'N'");
    json_fails("[nul]", "at byte 1: expected a value, got 'n'");
    json_fails("['a']", "at byte 1: expected a value, got '''");
    json_fails("\"a", "at byte 0: unterminated string");
    json_fails("\"a\tb\"", "at byte 2: control character in a string (escape it)");
    json_fails("\"\\x\"", "at byte 1: invalid escape in a string");
    json_fails("\"\\u12G4\"", "at byte 1: invalid \\u escape (four hex digits expected)");
    json_fails("\"\\ud800\"", "at byte 1: unpaired surrogate in a \\u escape");
    json_fails("\"\\udc00\"", "at byte 1: unpaired surrogate in a \\u escape");
    json_fails("\"\xc0\xaf\"", "at byte 1: invalid UTF-8 in a string");  /* overlong '/' */
    json_fails("\"\xed\xa0\x80\"", "at byte 1: invalid UTF-8 in a string"); /* a surrogate */
    json_fails("\"\xf4\x90\x80\x80\"", "at byte 1: invalid UTF-8 in a string"); /* > U+10FFFF */
    json_fails("\"\xe2\x82\"", "at byte 1: invalid UTF-8 in a string");      /* cut short */
    json_fails("[1] \x01", "at byte 4: expected the end of the text after the value, got byte 0x01");
    json_fails("{\"a\":1,\"b\":2,\"a\":3}", "at byte 13: duplicate key \"a\"");
    json_fails("[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]", "at byte 16: nested deeper than 16 levels");
    /* many keys (the sorted duplicate check) */
    char many[8192];
    size_t o = 0;
    o += (size_t)snprintf(many + o, sizeof many - o, "{");
    for (int i = 0; i < 300; i++)
        o += (size_t)snprintf(many + o, sizeof many - o, "%s\"k%d\":%d", i ? "," : "", i, i);
    snprintf(many + o, sizeof many - o, ",\"k123\":0}");
    rp_status st = rp_json_parse(&d, many, strlen(many), 0);
    CHECK(st == RP_ERR_ARG && strstr(rp_last_error(), ": duplicate key \"k123\""), "%s",
          rp_last_error());
    rp_json_free(&d);
    many[o] = '}';
    many[o + 1] = '\0';
    CHECK_STATUS(rp_json_parse(&d, many, strlen(many), 0), RP_OK, NULL);
    rp_json_free(&d);
    CHECK_STATUS(rp_json_parse(&d, many, strlen(many), 100), RP_ERR_ARG, ": more than 100 values");
    rp_json_free(&d);
    /* the writer escapes what the reader needs escaped */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    size_t w = rp_json_write_string(f, "a\"b\\c\n\x01", 7);
    fclose(f);
    CHECK(w == len && strcmp(buf, "\"a\\\"b\\\\c\\u000a\\u0001\"") == 0, "written: %s", buf);
    CHECK(rp_json_write_string(NULL, "a\"b\\c\n\x01", 7) == w, "counting pass agrees");
    CHECK_STATUS(rp_json_parse(&d, buf, len, 0), RP_OK, NULL);
    CHECK(d.nodes[0].str_len == 7 && memcmp(d.strings + d.nodes[0].str, "a\"b\\c\n\x01", 7) == 0,
          "read back");
    rp_json_free(&d);
    free(buf);
}

/* ---- the config as JSON ------------------------------------------------------------------------ */

static rp_model_cfg tiny_cfg(rp_pe pe)
{
    rp_model_cfg c = rp_model_cfg_default(11);
    c.d_model = 16;
    c.heads = 2;
    c.layers = 2;
    c.d_ff = 24;
    c.seq_len = 8;
    c.max_batch = 2;
    c.pe.mode = pe;
    c.seed = 3;
    return c;
}

static int same_cfg(const rp_model_cfg *a, const rp_model_cfg *b)
{
    return a->vocab == b->vocab && a->d_model == b->d_model && a->heads == b->heads &&
           a->layers == b->layers && a->d_ff == b->d_ff && a->seq_len == b->seq_len &&
           a->max_batch == b->max_batch && a->norm == b->norm && a->act == b->act &&
           a->dropout == b->dropout && a->pe.mode == b->pe.mode &&
           a->pe.fraction_qk == b->pe.fraction_qk && a->pe.fraction_v == b->pe.fraction_v &&
           a->pe.base == b->pe.base && a->pe.pairing == b->pe.pairing && a->seed == b->seed &&
           a->attention == b->attention && a->linear_rope == b->linear_rope;
}

static void cfg_fails(const char *json, const char *msg)
{
    rp_model_cfg c;
    rp_status st = rp_model_cfg_from_json(json, strlen(json), &c);
    CHECK(st == RP_ERR_ARG && strcmp(rp_last_error(), msg) == 0,
          "%s\n   got  \"%s\"\n   want \"%s\"", json, rp_last_error(), msg);
}

static void test_config_json(void)
{
    rp_model_cfg cs[4];
    cs[0] = tiny_cfg(RP_PE_ROPER);
    cs[1] = tiny_cfg(RP_PE_LEARNED);
    cs[1].norm = RP_NORM_POST;
    cs[1].act = RP_ACT_GELU;
    cs[1].pe.pairing = RP_PAIR_INTERLEAVED;
    cs[1].dropout = 0.1;
    cs[1].pe.base = 12345.678;
    cs[1].pe.fraction_qk = 0.3;
    cs[1].seed = UINT64_MAX;
    cs[2] = tiny_cfg(RP_PE_ROPE);
    cs[2].attention = RP_ATTN_LINEAR;
    cs[2].linear_rope = RP_LIN_BEFORE;
    cs[2].pe.fraction_v = 1.0 / 3.0;
    cs[3] = tiny_cfg(RP_PE_ROPER_LEGACY);
    cs[3].pe.base = 1e-300;
    char buf[1024];
    for (int i = 0; i < 4; i++) {
        size_t n = rp_model_cfg_to_json(&cs[i], buf, sizeof buf);
        rp_model_cfg back;
        CHECK(n < sizeof buf && rp_model_cfg_from_json(buf, n, &back) == RP_OK &&
                  same_cfg(&back, &cs[i]),
              "config %d through JSON: %s (%s)", i, buf, rp_last_error());
    }
    rp_model_cfg_to_json(&cs[1], buf, sizeof buf);
    CHECK(strstr(buf, "\"dropout\":0.1,") && strstr(buf, "\"base\":12345.678,") &&
              strstr(buf, "\"seed\":18446744073709551615,") && strstr(buf, "\"norm\":\"post\""),
          "shortest numbers, names: %s", buf);
    /* Python's spelling (json.dumps): floats with ".0", spaces */
    const char *py = "{\"vocab\": 11, \"d_model\": 16, \"heads\": 2, \"layers\": 2, \"d_ff\": 24, "
                     "\"seq_len\": 8, \"norm\": \"pre\", \"activation\": \"relu\", \"pe\": \"roper\", "
                     "\"fraction_qk\": 1.0, \"fraction_v\": 1.0, \"base\": 10000.0, \"pairing\": "
                     "\"half\", \"attention\": \"softmax\", \"linear_rope\": \"after\", \"seed\": -1}";
    rp_model_cfg c;
    CHECK(rp_model_cfg_from_json(py, strlen(py), &c) == RP_OK && c.max_batch == 16 &&
              c.dropout == 0.0 && c.seed == UINT64_MAX && c.pe.mode == RP_PE_ROPER,
          "Python's json.dumps, optional keys left out: %s", rp_last_error());
    cfg_fails("[]", "not a JSON object (an array)");
    cfg_fails("{\"vocab\":1,", "at byte 11: expected a string key in an object, got the end of the text");
    cfg_fails("{\"pee\":1}", "unknown key 'pee'");
    cfg_fails("{\"vocab\":11}", "no key 'd_model'");
    cfg_fails("{\"vocab\":\"11\"}", "'vocab' must be an integer, got a string");
    cfg_fails("{\"vocab\":11.0}", "'vocab': 11.0 is not an integer");
    cfg_fails("{\"vocab\":99999999999999999999}", "'vocab': 99999999999999999999 is out of range");
    cfg_fails("{\"base\":true}", "'base' must be a number, got true");
    cfg_fails("{\"base\":1e999}", "'base': 1e999 is out of range");
    char want[512] = "'pe' must be one of "; /* every mode of the table, in code order */
    for (int pe = 0; pe < RP_PE_COUNT; pe++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", pe ? ", " : "",
                 rp_pe_names[pe]);
    snprintf(want + strlen(want), sizeof want - strlen(want), "; got \"rope2\"");
    cfg_fails("{\"pe\":\"rope2\"}", want);
    cfg_fails("{\"norm\":1}", "'norm' must be one of pre, post; got a number");
    cfg_fails("{\"linear_rope\":\"\\u0001\"}", "'linear_rope' must be one of after, before; got \"\\x01\"");
    cfg_fails("{\"seed\":1.5}", "'seed': 1.5 is not an integer");
}

/* ---- round trips ------------------------------------------------------------------------------- */

static int same_params(rp_model *a, rp_model *b)
{
    int64_t n = rp_model_param_count(a);
    return n == rp_model_param_count(b) &&
           memcmp(rp_model_params(a)->data, rp_model_params(b)->data, (size_t)n * 4) == 0;
}

static void test_round_trips(void)
{
    rp_model_cfg cs[4] = {tiny_cfg(RP_PE_ROPER), tiny_cfg(RP_PE_LEARNED), tiny_cfg(RP_PE_ROPE),
                          tiny_cfg(RP_PE_ROPER)};
    cs[1].norm = RP_NORM_POST;
    cs[2].attention = RP_ATTN_LINEAR;
    cs[3].tie_embeddings = 1; /* no head.weight; roper.config holds "tie_embeddings":true */
    char p[512];
    path_in(p, sizeof p, "m.safetensors");
    for (int i = 0; i < 4; i++) {
        rp_model *m = check_model_new(&cs[i]);
        rp_model_params(m)->data[5] = NAN; /* stored bit for bit like any value */
        rp_model_params(m)->data[6] = -0.0f;
        if (!CHECK_STATUS(rp_safetensors_save(p, m), RP_OK, NULL)) continue;
        size_t n = 0;
        unsigned char *b = check_read_bytes(p, &n);
        uint64_t hl = 0;
        for (int k = 0; k < 8; k++) hl |= (uint64_t)b[k] << (8 * k);
        CHECK(hl % 8 == 0 && b[8] == '{' && n == 8 + hl + 4 * (size_t)rp_model_param_count(m),
              "layout: header %llu bytes, file %zu", (unsigned long long)hl, n);
        free(b);
        rp_model *back = NULL;
        if (CHECK_STATUS(rp_safetensors_load(p, &back), RP_OK, NULL)) {
            CHECK(same_cfg(rp_model_config(back), rp_model_config(m)) && same_params(back, m),
                  "model %d: config and parameters back bit for bit", i);
            rp_model_free(back);
        }
        rp_model_cfg other = cs[i];
        other.seed = 99;
        other.max_batch = 1;
        other.dropout = 0.5;
        other.seq_len = 6; /* not part of what the weights mean... */
        if (cs[i].pe.mode == RP_PE_LEARNED)
            other.seq_len = cs[i].seq_len; /* ...unless pos.weight */
        rp_model *o = check_model_new(&other);
        CHECK(rp_safetensors_load_into(p, o) == RP_OK && same_params(o, m),
              "model %d: weights into a model of another seed, batch, dropout: %s", i,
              rp_last_error());
        rp_model_free(o);
        if (cs[i].tie_embeddings) { /* the weights' meaning differs from an untied model's */
            other.tie_embeddings = 0;
            o = check_model_new(&other);
            CHECK(rp_safetensors_load_into(p, o) == RP_ERR_IO &&
                      strstr(rp_last_error(), "tie_embeddings"),
                  "a tied file into an untied model: refused naming tie_embeddings (%s)",
                  rp_last_error());
            rp_model_free(o);
        }
        rp_model_free(m);
    }
    unlink(p);
}

/* ---- the files PyTorch made --------------------------------------------------------------------- */

/* The logits of m on the fixture's tokens against the fixture's float64 reference. */
static void check_logits(rp_model *m, const char *name)
{
    char p[512], q[512];
    snprintf(q, sizeof q, "%s_tokens.npy", name);
    check_interop_fixture(p, sizeof p, q);
    rp_tensor tok, ref;
    if (!CHECK_STATUS(rp_npy_load(p, &tok, NULL), RP_OK, NULL)) return;
    snprintf(q, sizeof q, "%s_logits.npy", name);
    check_interop_fixture(p, sizeof p, q);
    if (!CHECK_STATUS(rp_npy_load(p, &ref, NULL), RP_OK, NULL)) return;
    int64_t B = tok.shape[0], T = tok.shape[1];
    int32_t ids[64];
    for (int64_t i = 0; i < B * T; i++) ids[i] = (int32_t)rp_tensor_data(&tok)[i];
    if (CHECK_STATUS(rp_model_forward(m, ids, NULL, NULL, B, T, 0, NULL), RP_OK, NULL))
        CHECK_CLOSE(rp_model_logits(m), rp_tensor_data(&ref), rp_tensor_numel(&ref), 1e-5, name);
    rp_tensor_release(&tok);
    rp_tensor_release(&ref);
}

static void test_pytorch_files(void)
{
    char p[512];
    rp_model *m = NULL, *plain = NULL;
    if (!CHECK_STATUS(rp_safetensors_load(check_interop_fixture(p, sizeof p, "torch_roper.safetensors"), &m),
                      RP_OK, NULL))
        return;
    const rp_model_cfg *c = rp_model_config(m);
    CHECK(c->vocab == 11 && c->d_model == 16 && c->pe.mode == RP_PE_ROPER && c->max_batch == 2,
          "the config from Python's metadata");
    check_logits(m, "torch_roper");
    /* a state dict without roper's metadata: only into a model built from the config */
    check_interop_fixture(p, sizeof p, "torch_roper_plain.safetensors");
    char want[1024];
    snprintf(want, sizeof want, "%s: no roper.config in the metadata (not written by roper: build "
                                "the model from its config, then load the weights into it)", p);
    CHECK(rp_safetensors_load(p, &plain) == RP_ERR_IO && strcmp(rp_last_error(), want) == 0 &&
              plain == NULL, "%s", rp_last_error());
    plain = check_model_new(c);
    CHECK(rp_safetensors_load_into(p, plain) == RP_OK && same_params(plain, m), "plain: %s",
          rp_last_error());
    rp_model_free(plain);
    /* F64: the same float32 weights, exactly */
    rp_model *m64 = NULL;
    if (CHECK_STATUS(rp_safetensors_load(check_interop_fixture(p, sizeof p, "torch_roper_f64.safetensors"), &m64),
                     RP_OK, NULL)) {
        CHECK(same_params(m64, m), "F64 file gives the same parameters");
        rp_model_free(m64);
    }
    /* our own file of this model holds the same tensors as PyTorch's, in layout order */
    char q[512];
    path_in(q, sizeof q, "again.safetensors");
    rp_model *again = NULL;
    if (CHECK_STATUS(rp_safetensors_save(q, m), RP_OK, NULL) &&
        CHECK_STATUS(rp_safetensors_load(q, &again), RP_OK, NULL)) {
        CHECK(same_params(again, m), "written and read again");
        rp_model_free(again);
    }
    unlink(q);
    rp_model_free(m);
    m = NULL;
    if (CHECK_STATUS(rp_safetensors_load(check_interop_fixture(p, sizeof p, "torch_learned_post.safetensors"), &m),
                     RP_OK, NULL)) {
        c = rp_model_config(m);
        CHECK(c->pe.mode == RP_PE_LEARNED && c->norm == RP_NORM_POST && c->act == RP_ACT_GELU &&
                  c->pe.pairing == RP_PAIR_INTERLEAVED && c->pe.base == 100.0 && c->seed == 7,
              "learned/post/gelu/interleaved config");
        check_logits(m, "torch_learned_post");
        rp_model_free(m);
    }
}

/* ---- refusals ----------------------------------------------------------------------------------- */

/* A file: the header text (its length as given, or its real length when hlen is 0), then ndata
 * bytes of data (0x3f: floats of about 0.75). */
static void write_st(const char *path, const char *header, uint64_t hlen, size_t ndata)
{
    size_t h = strlen(header);
    if (!hlen) hlen = h;
    unsigned char *b = malloc(8 + h + ndata + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, header, h);
    memset(b + 8 + h, 0x3f, ndata);
    check_write_bytes(path, b, 8 + h + ndata);
    free(b);
}

static void expect_fail(const char *path, rp_model *into, const char *tail)
{
    char want[1024];
    snprintf(want, sizeof want, "%s: %s", path, tail);
    rp_status st;
    rp_model *out = NULL;
    if (into) {
        st = rp_safetensors_load_into(path, into);
    } else {
        st = rp_safetensors_load(path, &out);
    }
    CHECK(st == RP_ERR_IO && strcmp(rp_last_error(), want) == 0 && out == NULL,
          "%s\n   got  (%d) \"%s\"\n   want \"%s\"", path, (int)st, rp_last_error(), want);
    rp_model_free(out);
}

static void test_structure(void)
{
    char p[512];
    path_in(p, sizeof p, "bad.safetensors");
    check_write_bytes(p, "", 0);
    expect_fail(p, NULL, "empty file (not a safetensors file)");
    check_write_bytes(p, "\x10\0\0\0\0", 5);
    expect_fail(p, NULL, "truncated (5 bytes, shorter than the 8-byte header length)");
    write_st(p, "{}", UINT64_MAX, 0);
    expect_fail(p, NULL, "truncated (the header length says 18446744073709551615 bytes, 2 follow it)");
    write_st(p, "{}", 3, 0);
    expect_fail(p, NULL, "truncated (the header length says 3 bytes, 2 follow it)");
    write_st(p, "{}", 100000001, 0);
    if (CHECK(truncate(p, 8 + 100000001) == 0, "truncate: %s", strerror(errno)))
        expect_fail(p, NULL, "header length 100000001 is more than the 100000000 bytes safetensors allows");
    write_st(p, " {}", 0, 0);
    expect_fail(p, NULL, "bad header (it must start with '{')");
    write_st(p, "", 0, 0);
    expect_fail(p, NULL, "bad header (it must start with '{')");
    static const struct {
        const char *header;
        size_t ndata;
        const char *msg;
    } bad[] = {
        {"{\"a\":}", 0, "bad header (at byte 5: expected a value, got '}')"},
        {"{\"a\":{},\"a\":{}}", 0, "bad header (at byte 8: duplicate key \"a\")"},
        {"{\"__metadata__\":5}", 0, "bad header (__metadata__ is a number, not an object)"},
        {"{\"__metadata__\":{\"a\":1}}", 0, "bad header (__metadata__ \"a\" is a number, not a string)"},
        {"{\"w\":[]}", 0, "bad header (tensor \"w\" is an array, not an object)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"x\":1}}", 4,
         "bad header (tensor \"w\": unknown key \"x\")"},
        {"{\"w\":{\"shape\":[],\"data_offsets\":[0,4]}}", 4, "bad header (tensor \"w\": no \"dtype\")"},
        {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "bad header (tensor \"w\": no \"shape\")"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[]}}", 4, "bad header (tensor \"w\": no \"data_offsets\")"},
        {"{\"w\":{\"dtype\":5,\"shape\":[],\"data_offsets\":[0,4]}}", 4,
         "bad header (tensor \"w\": dtype must be a string, got a number)"},
        {"{\"w\":{\"dtype\":\"F33\",\"shape\":[],\"data_offsets\":[0,4]}}", 4,
         "bad header (tensor \"w\": unknown dtype \"F33\")"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":\"x\",\"data_offsets\":[0,4]}}", 4,
         "bad header (tensor \"w\": shape must be an array of integers >= 0)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
         "bad header (tensor \"w\": shape must be an array of integers >= 0)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
         "bad header (tensor \"w\": shape: -1 is not an integer >= 0)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
         "bad header (tensor \"w\": shape: 1.0 is not an integer >= 0)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,4]}}", 4,
         "bad header (tensor \"w\": shape: 9223372036854775808 is out of range)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
         "bad header (tensor \"w\": data_offsets must be [begin, end])"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}", 4,
         "bad header (tensor \"w\": data_offsets must be [begin, end])"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
         "bad header (tensor \"w\": data_offsets [4, 0] end before they begin)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", 4,
         "bad header (tensor \"w\": data_offsets: 18446744073709551616 is out of range)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         "tensor \"w\" has 9 dims, more than the 8 a tensor holds"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1048576,1048577],\"data_offsets\":[0,4]}}", 4,
         "tensor \"w\" of shape [1048576 x 1048577] has more than 2^40 elements"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296],\"data_offsets\":[0,0]}}",
         0, "tensor \"w\" of shape [0 x 4294967296 x 4294967296] is too large (its sizes other "
            "than 0 multiply to more than 2^40)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 20,
         "tensor \"w\": data_offsets [0, 20] hold 20 bytes, its shape [2 x 3] of F32 needs 24"},
        {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         "tensor \"w\": data_offsets [0, 8] hold 8 bytes, its shape [2] of F64 needs 16"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
         "truncated (tensor \"w\" ends at byte 8 of the data, the file has 4 data bytes)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[18446744073709551608,"
         "18446744073709551612]}}", 4,
         "truncated (tensor \"w\" ends at byte 18446744073709551612 of the data, the file has 4 "
         "data bytes)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
         "tensors \"a\" (bytes 0..8) and \"b\" (bytes 4..12) overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         "tensors \"a\" (bytes 0..8) and \"b\" (bytes 0..8) overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", 20,
         "bytes 8..12 of the data belong to no tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
         "bytes 0..4 of the data belong to no tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12,
         "4 bytes after the last tensor (trailing data)"},
        {"{}", 1, "1 bytes after the last tensor (trailing data)"},
        {"{\"\\u0001w\\\"\":[]}", 0, "bad header (tensor \"\\x01w\"\" is an array, not an object)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_st(p, bad[i].header, 0, bad[i].ndata);
        expect_fail(p, NULL, bad[i].msg);
    }
    /* accepted: an empty tensor anywhere in the tiling, BF16 and I64 entries (refused only by
     * the model match), padding with spaces, tensors in any order */
    static const char *const fine[] = {
        "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
        "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]},"
        "\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}        ",
    };
    write_st(p, fine[0], 0, 16);
    rp_model_cfg c = tiny_cfg(RP_PE_ROPER);
    rp_model *m = check_model_new(&c);
    expect_fail(p, m, "tensor \"b\" is not a parameter of the model");
    rp_model_free(m);
    unlink(p);
}

/* A model's own file, changed: refusals against the model, each leaving it untouched. */
static void test_against_model(void)
{
    rp_model_cfg c = tiny_cfg(RP_PE_ROPER);
    rp_model *m = check_model_new(&c);
    char good[512], p[512];
    path_in(good, sizeof good, "good.safetensors");
    path_in(p, sizeof p, "bad.safetensors");
    rp_safetensors_save(good, m);
    size_t n = 0;
    unsigned char *b = check_read_bytes(good, &n);
    uint64_t hl = 0;
    for (int k = 0; k < 8; k++) hl |= (uint64_t)b[k] << (8 * k);
    char *h = malloc(hl + 1);
    memcpy(h, b + 8, hl);
    h[hl] = '\0';
    const unsigned char *data = b + 8 + hl;
    size_t ndata = n - 8 - hl;

    c.seed = 77;
    rp_model *into = check_model_new(&c);
    float *before = check_copy_floats(rp_model_params(into)->data, rp_model_param_count(into));
    /* each case: replace `from` by `to` in the header (first occurrence) */
    static const struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"\"head.bias\"", "\"head.biaz\"", "tensor \"head.biaz\" is not a parameter of the model"},
        {"\"dtype\":\"F32\",\"shape\":[11]", "\"dtype\":\"I32\",\"shape\":[11]",
         "tensor \"head.bias\" has dtype I32; roper reads F32 and F64 (convert with .float())"},
        {"\"shape\":[11,16]", "\"shape\":[16,11]",
         "tensor \"embed.weight\" is [16 x 11], the model's is [11 x 16]"},
        {"\"pe\\\":\\\"roper\\\"", "\"pe\\\":\\\"rope\\\" ",
         "the file's roper.config has pe \"rope\", the model \"roper\""},
        {"\"d_model\\\":16", "\"d_model\\\":32",
         "the file's roper.config has d_model 32, the model 16"},
        {"\"base\\\":10000", "\"base\\\":10001",
         "the file's roper.config has base 10001, the model 10000"},
        {"\"roper.version\":\"1\"", "\"roper.version\":\"2\"",
         "roper.version \"2\" is not supported (this is version 1)"},
        {"\"roper.version\":\"1\"", "\"roper.versiom\":\"1\"",
         "the metadata has roper.config but no roper.version"},
        {"\"vocab\\\":11", "\"vocab\\\":\\\"11\\\"",
         "bad roper.config ('vocab' must be an integer, got a string)"},
        {"\"pairing\\\":\\\"half\\\"", "\"pairing\\\":\\\"hulf\\\"",
         "bad roper.config ('pairing' must be one of half, interleaved; got \"hulf\")"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *at = strstr(h, cases[i].from);
        if (!CHECK(at != NULL, "case %zu: '%s' not in the header", i, cases[i].from)) continue;
        size_t fl = strlen(cases[i].from), tl = strlen(cases[i].to);
        char *nh = malloc(hl + tl + 1);
        size_t pre = (size_t)(at - h);
        memcpy(nh, h, pre);
        memcpy(nh + pre, cases[i].to, tl);
        strcpy(nh + pre + tl, at + fl);
        size_t nhl = strlen(nh);
        unsigned char *f = malloc(8 + nhl + ndata);
        for (int k = 0; k < 8; k++) f[k] = (unsigned char)((uint64_t)nhl >> (8 * k));
        memcpy(f + 8, nh, nhl);
        memcpy(f + 8 + nhl, data, ndata);
        check_write_bytes(p, f, 8 + nhl + ndata);
        expect_fail(p, into, cases[i].msg);
        CHECK(memcmp(before, rp_model_params(into)->data,
                     (size_t)rp_model_param_count(into) * 4) == 0, "case %zu: model untouched", i);
        free(f);
        free(nh);
    }
    /* a tensor missing: the header without head.bias, the data without its bytes */
    {
        char *at = strstr(h, ",\"head.bias\"");
        char *end = strchr(at + 1, '}');
        size_t nhl = (size_t)(at - h) + strlen(end + 1);
        char *nh = malloc(hl + 1);
        memcpy(nh, h, (size_t)(at - h));
        strcpy(nh + (at - h), end + 1);
        while (nh[strlen(nh) - 1] == ' ') nh[strlen(nh) - 1] = '\0';
        nhl = strlen(nh);
        unsigned char *f = malloc(8 + nhl + ndata);
        for (int k = 0; k < 8; k++) f[k] = (unsigned char)((uint64_t)nhl >> (8 * k));
        memcpy(f + 8, nh, nhl);
        memcpy(f + 8 + nhl, data, ndata - 44);
        check_write_bytes(p, f, 8 + nhl + ndata - 44);
        char msg[128];
        snprintf(msg, sizeof msg, "no tensor \"head.bias\" (the model has %d parameter tensors, "
                                  "the file %d)", rp_model_num_tensors(m), rp_model_num_tensors(m) - 1);
        expect_fail(p, into, msg);
        expect_fail(p, NULL, "the config needs 4315 parameters, the file holds 4304");
        free(f);
        free(nh);
    }
    /* a config that fails the model's checks, one larger than the file */
    {
        const char *bads[][2] = {
            {"\"heads\\\":2", "\"heads\\\":3"},
            {"\"layers\\\":2", "\"layers\\\":200"},
        };
        const char *msgs[] = {
            "bad model config: d_model 16 is not divisible by heads 3",
            "the config needs 392395 parameters, the file holds 4315",
        };
        for (int i = 0; i < 2; i++) {
            char *at = strstr(h, bads[i][0]);
            size_t fl = strlen(bads[i][0]), tl = strlen(bads[i][1]);
            char *nh = malloc(hl + tl + 1);
            memcpy(nh, h, (size_t)(at - h));
            memcpy(nh + (at - h), bads[i][1], tl);
            strcpy(nh + (at - h) + tl, at + fl);
            size_t nhl = strlen(nh);
            unsigned char *f = malloc(8 + nhl + ndata);
            for (int k = 0; k < 8; k++) f[k] = (unsigned char)((uint64_t)nhl >> (8 * k));
            memcpy(f + 8, nh, nhl);
            memcpy(f + 8 + nhl, data, ndata);
            check_write_bytes(p, f, 8 + nhl + ndata);
            expect_fail(p, NULL, msgs[i]);
            free(f);
            free(nh);
        }
    }
    CHECK(memcmp(before, rp_model_params(into)->data, (size_t)rp_model_param_count(into) * 4) == 0,
          "model untouched after every refusal");
    /* truncated at every length, and every header byte damaged: refused (or read), no crash */
    int bad = 0, read_ok = 0;
    for (size_t len = 0; len < n; len += len < 8 + hl + 64 ? 1 : 97) {
        check_write_bytes(p, b, len);
        rp_model *out = NULL;
        if (rp_safetensors_load(p, &out) != RP_ERR_IO || out) bad++;
        if (rp_safetensors_load_into(p, into) != RP_ERR_IO) bad++;
        rp_model_free(out);
    }
    CHECK(bad == 0, "%d truncated files were not refused", bad);
    for (size_t i = 0; i < 8 + hl; i++) {
        unsigned char save = b[i];
        b[i] = (unsigned char)(save ^ (i % 2 ? 0x01 : 0x20));
        check_write_bytes(p, b, n);
        rp_model *out = NULL;
        if (rp_safetensors_load(p, &out) == RP_OK) read_ok++;
        rp_model_free(out);
        b[i] = save;
    }
    printf("  %d of %llu damaged headers still read (changes inside names or numbers that keep "
           "the file consistent)\n", read_ok, (unsigned long long)(8 + hl));
    CHECK(memcmp(before, rp_model_params(into)->data, (size_t)rp_model_param_count(into) * 4) == 0,
          "model untouched after the truncations");
    free(before);
    free(h);
    free(b);
    rp_model_free(into);
    rp_model_free(m);
    unlink(p);
    unlink(good);
}

/* ---- a model's positions and own tables ---------------------------------------------------- */

/* The logits of m on fixed tokens (2 x 8) into out (2 x 8 x 11). */
static void logits_of(rp_model *m, float *out)
{
    int32_t ids[16];
    for (int i = 0; i < 16; i++) ids[i] = (int32_t)((i * 7 + 3) % 11);
    CHECK_STATUS(rp_model_forward(m, ids, NULL, NULL, 2, 8, 0, NULL), RP_OK, NULL);
    memcpy(out, rp_model_logits(m), 2 * 8 * 11 * sizeof(float));
}

/* Writes path: the file `b` (n bytes, header length hl) with the first `from` of its header
 * replaced by `to` (the data as they were, or with the 8 bytes at data byte `at` set to `word`
 * when at >= 0). 0 when `from` is not in the header. */
static int write_edit(const char *path, const unsigned char *b, size_t n, uint64_t hl,
                      const char *from, const char *to, long at, uint64_t word)
{
    char *h = malloc(hl + 1);
    memcpy(h, b + 8, hl);
    h[hl] = '\0';
    char *x = strstr(h, from);
    if (!x) {
        free(h);
        return 0;
    }
    size_t fl = strlen(from), tl = strlen(to), ndata = n - 8 - hl;
    size_t nhl = hl - fl + tl;
    unsigned char *f = malloc(8 + nhl + ndata);
    for (int k = 0; k < 8; k++) f[k] = (unsigned char)((uint64_t)nhl >> (8 * k));
    size_t pre = (size_t)(x - h);
    memcpy(f + 8, h, pre);
    memcpy(f + 8 + pre, to, tl);
    memcpy(f + 8 + pre + tl, x + fl, hl - pre - fl);
    memcpy(f + 8 + nhl, b + 8 + hl, ndata);
    for (int k = 0; at >= 0 && k < 8; k++)
        f[8 + nhl + (size_t)at + (size_t)k] = (unsigned char)(word >> (8 * k));
    check_write_bytes(path, f, 8 + nhl + ndata);
    free(f);
    free(h);
    return 1;
}

/* Positions (1-D, axial, sections, mixed), own frequencies and angles, learned frequencies moved
 * off their start: saved, read back by rp_safetensors_load with the same logits bit for bit;
 * rp_safetensors_load_into takes the weights only; every refusal of a file whose positions or
 * tables are wrong. */
static void test_positions(void)
{
    static const int64_t grid[16] = {0, 0, 0, 1, 0, 2, 0, 3, 1, 0, 1, 1, 1, 2, 1, 3};
    static const int64_t pos1[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    static const double mix[8] = {0.75, -0.5, 0.125, 0.3, 0.25, 1.5, -0.0625, 0.5};
    static const double theta[4] = {1, 0.3, -0.1, 0.01};
    double angles[8 * 4];
    for (int i = 0; i < 32; i++) angles[i] = 0.1 * (i / 4) * (i % 4 + 1) - 0.05 * (i % 3);
    enum { AXIAL, SECTIONS, MIXED, POS1D, ANGLES, MIXED_ROPE, NCASES };
    char p[512], bad[512];
    path_in(p, sizeof p, "pos.safetensors");
    path_in(bad, sizeof bad, "pos_bad.safetensors");
    for (int k = 0; k < NCASES; k++) {
        rp_model_cfg c = tiny_cfg(k == SECTIONS || k == POS1D || k == MIXED_ROPE ? RP_PE_ROPE
                                                                              : RP_PE_ROPER);
        c.learn_freq = k == MIXED || k == POS1D;
        rp_model *m = check_model_new(&c);
        rp_rope_axes ax;
        memset(&ax, 0, sizeof ax);
        ax.n = k == POS1D ? 0 : 2;
        ax.map = k == SECTIONS                     ? RP_AXES_SECTIONS
                 : k == MIXED || k == MIXED_ROPE ? RP_AXES_MIXED
                                                 : RP_AXES_AXIAL;
        ax.sections[0] = k == SECTIONS ? 1 : 0, ax.sections[1] = k == SECTIONS ? 3 : 0;
        ax.mix = ax.map == RP_AXES_MIXED ? mix : NULL, ax.n_mix = ax.map == RP_AXES_MIXED ? 4 : 0;
        if (k == POS1D) CHECK_STATUS(rp_model_set_freq(m, theta, 4, NULL, 0, 0), RP_OK, NULL);
        if (k == ANGLES) CHECK_STATUS(rp_model_set_freq(m, NULL, 0, angles, 8, 4), RP_OK, NULL);
        if (k != ANGLES)
            CHECK_STATUS(rp_model_set_positions(m, &ax, k == POS1D ? pos1 : grid, 8), RP_OK,
                         NULL);
        int fi = rp_model_find_param(m, "rope.freq");
        if (c.learn_freq && CHECK(fi >= 0, "case %d: rope.freq", k)) /* as training moves it */
            for (int i = 0; i < 12; i++)
                rp_model_params(m)->data[rp_model_param(m, fi)->offset + i] += 0.01f * (i + 1);
        float want[176], got[176];
        logits_of(m, want);
        if (!CHECK_STATUS(rp_safetensors_save(p, m), RP_OK, NULL)) continue;
        rp_model *back = NULL;
        if (CHECK_STATUS(rp_safetensors_load(p, &back), RP_OK, NULL)) {
            logits_of(back, got);
            int64_t ra = 0, rb = 0;
            const int64_t *pa = rp_model_positions(m, &ra), *pb = rp_model_positions(back, &rb);
            const rp_rope_freq *fa = rp_model_freq(m), *fb = rp_model_freq(back);
            int A = rp_rope_freq_axes(fa);
            CHECK(same_cfg(rp_model_config(back), rp_model_config(m)) && same_params(back, m) &&
                      memcmp(want, got, sizeof want) == 0,
                  "case %d: config, parameters and logits back bit for bit", k);
            CHECK(ra == rb && !pa == !pb && (!pa || memcmp(pa, pb, (size_t)(ra * A) * 8) == 0) &&
                      fa->axes.n == fb->axes.n && fa->axes.map == fb->axes.map &&
                      memcmp(fa->axes.sections, fb->axes.sections, sizeof fa->axes.sections) == 0 &&
                      fa->axes.n_mix == fb->axes.n_mix && !fa->axes.mix == !fb->axes.mix &&
                      (!fa->axes.mix || memcmp(fa->axes.mix, fb->axes.mix, sizeof mix) == 0),
                  "case %d: the positions and their map back", k);
            CHECK(!fa->theta == !fb->theta && !fa->angles == !fb->angles &&
                      (!fa->theta || memcmp(fa->theta, fb->theta, sizeof theta) == 0) &&
                      (!fa->angles || (fb->rows == 8 && fb->n_angles == 4 &&
                                       memcmp(fa->angles, fb->angles, sizeof angles) == 0)),
                  "case %d: the own table back", k);
            rp_model_free(back);
        }
        /* the weights only into a model of the same config: it keeps its own (no) positions */
        rp_model *plain = check_model_new(&c);
        CHECK(rp_safetensors_load_into(p, plain) == RP_OK && same_params(plain, m) &&
                  !rp_model_positions(plain, NULL) && !rp_model_freq(plain)->theta &&
                  !rp_model_freq(plain)->angles,
              "case %d: load_into takes the weights only: %s", k, rp_last_error());
        rp_model_free(plain);
        /* refusals: a header changed (and a value of the data) */
        size_t n = 0;
        unsigned char *b = check_read_bytes(p, &n);
        uint64_t hl = 0;
        for (int i = 0; i < 8; i++) hl |= (uint64_t)b[i] << (8 * i);
        long pos_at = (long)rp_model_param_count(m) * 4; /* the positions follow the parameters */
        static const struct {
            int k, into; /* the case's file; 1: rp_safetensors_load_into refuses it too */
            const char *from, *to;
            long at; /* a data word set to 2^62 (-1: none) */
            const char *msg;
        } cases[] = {
            {AXIAL, 1, "\"roper.positions\":\"roper.positions\"",
             "\"roper.positions\":\"roper.positionz\"", -1,
             "no tensor \"roper.positionz\" (the metadata's roper.positions names it)"},
            {AXIAL, 1, "\"roper.positions\":{\"dtype\":\"I64\"",
             "\"roper.positions\":{\"dtype\":\"F64\"", -1,
             "tensor \"roper.positions\" (the metadata's roper.positions) has dtype F64, not I64"},
            {AXIAL, 1, "\"dtype\":\"I64\",\"shape\":[8,2]", "\"dtype\":\"I64\",\"shape\":[4,4]",
             -1, "tensor \"roper.positions\" (the metadata's roper.positions) is [4 x 4]; [rows] "
                 "or [rows x axes], 1 to 3 axes expected"},
            {AXIAL, 1, "\"dtype\":\"I64\",\"shape\":[8,2]", "\"dtype\":\"I64\",\"shape\":[16]", -1,
             "the metadata's roper.axes needs vector positions (roper.positions [rows x axes])"},
            {AXIAL, 0, "\"dtype\":\"I64\",\"shape\":[8,2]", "\"dtype\":\"I64\",\"shape\":[2,8]", -1,
             "tensor \"roper.positions\" (the metadata's roper.positions) is [2 x 8]; [rows] or "
             "[rows x axes], 1 to 3 axes expected"},
            {AXIAL, 0, "\"dtype\":\"I64\",\"shape\":[8,2]", "\"dtype\":\"I64\",\"shape\":[4,2]", -2,
             NULL}, /* data no longer tiled: checked by the structure's rules */
            {AXIAL, 0, "\"roper.axes\":\"axial\"", "\"roper.axes\":\"axiel\"", -1,
             "roper.axes \"axiel\" is not one of axial, sections, mixed"},
            {AXIAL, 0, "\"roper.axes\":\"axial\"", "\"roper.axes\":\"sections\"", -1,
             "roper.axes \"sections\" needs the metadata's roper.sections"},
            {AXIAL, 0, "\"roper.version\"", "\"roper.version\"", 0,
             "bad positions: positions: row 0, axis 0 holds 4611686018427387904; positions must "
             "be within 2^53"},
            {SECTIONS, 0, "\"roper.axes\":\"sections\"", "\"roper.axes\":\"axial\"", -1,
             "the metadata's roper.sections does nothing with roper.axes \"axial\""},
            {SECTIONS, 0, "\"roper.version\"", "\"roper.version\"", 136, /* sections[1] */
             "bad positions: sections {1, 4611686018427387904} hold 4611686018427387905 pairs; "
             "d_rot_q 8 has 4"},
            {MIXED, 1, "\"roper.mix\":\"roper.mix\"", "\"roper.mix\":\"roper.positions\"", -1,
             "the metadata's roper.positions and roper.mix both name tensor \"roper.positions\""},
            {MIXED, 0, ",\"roper.mix\":\"roper.mix\"", "", -1,
             "roper.axes \"mixed\" needs the metadata's roper.mix"},
            {MIXED, 0, "\"roper.mix\":{\"dtype\":\"F64\",\"shape\":[2,4]",
             "\"roper.mix\":{\"dtype\":\"F64\",\"shape\":[1,8]", -1,
             "tensor \"roper.mix\" (the metadata's roper.mix) is [1 x 8]; the positions have 2 "
             "axes"},
            {MIXED, 0, "\"roper.mix\":{\"dtype\":\"F64\",\"shape\":[2,4]",
             "\"roper.mix\":{\"dtype\":\"F64\",\"shape\":[4,2]", -1,
             "tensor \"roper.mix\" (the metadata's roper.mix) is [4 x 2]; the positions have 2 "
             "axes"},
            {MIXED_ROPE, 0, "\"fraction_qk\\\":1", "\"fraction_qk\\\":0.5", -1,
             "bad positions: tensor \"roper.mix\" (the metadata's roper.mix) is [2 x 4]; [2 x 2] "
             "expected (the positions' axes x d_rot/2)"},
            {POS1D, 0, "\"roper.positions\":\"roper.positions\"",
             "\"roper.positions\":\"roper.positions\",\"roper.axes\":\"axial\"", -1,
             "the metadata's roper.axes needs vector positions (roper.positions [rows x axes])"},
            {POS1D, 0, "\"roper.freq\":{\"dtype\":\"F64\",\"shape\":[4]",
             "\"roper.freq\":{\"dtype\":\"F64\",\"shape\":[2,2]", -1,
             "tensor \"roper.freq\" (the metadata's roper.freq) is [2 x 2]; [pairs] expected"},
            {POS1D, 0, "\"roper.freq\":{\"dtype\":\"F64\",\"shape\":[4]",
             "\"roper.freq\":{\"dtype\":\"F64\",\"shape\":[1,4]", -1,
             "tensor \"roper.freq\" (the metadata's roper.freq) is [1 x 4]; [pairs] expected"},
            {ANGLES, 0, "\"roper.angles\":{\"dtype\":\"F64\",\"shape\":[8,4]",
             "\"roper.angles\":{\"dtype\":\"F64\",\"shape\":[16,2]", -1,
             "bad frequency table: angles hold 2 per position; d_rot_q 8 needs 4"},
            {ANGLES, 0, "\"roper.angles\":\"roper.angles\"", "\"roper.angles\":\"head.bias\"", -1,
             "tensor \"head.bias\" (the metadata's roper.angles) has dtype F32, not F64"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            if (cases[i].k != k) continue;
            long at = cases[i].at < 0 ? -1 : pos_at + cases[i].at;
            if (!CHECK(write_edit(bad, b, n, hl, cases[i].from, cases[i].to, at,
                                  (uint64_t)1 << 62),
                       "case %d/%zu: '%s' not in the header", k, i, cases[i].from))
                continue;
            if (!cases[i].msg) {
                rp_model *out = NULL;
                CHECK(rp_safetensors_load(bad, &out) == RP_ERR_IO && !out, "case %d/%zu: %s", k,
                      i, rp_last_error());
                continue;
            }
            expect_fail(bad, NULL, cases[i].msg);
            if (cases[i].into) {
                rp_model *into = check_model_new(&c);
                expect_fail(bad, into, cases[i].msg);
                rp_model_free(into);
            }
        }
        free(b);
        rp_model_free(m);
    }
    unlink(p);
    unlink(bad);
}

static void test_files_and_args(void)
{
    rp_model_cfg c = tiny_cfg(RP_PE_ROPE);
    rp_model *m = check_model_new(&c), *out = NULL;
    char p[512];
    path_in(p, sizeof p, "missing.safetensors");
    expect_fail(p, NULL, "No such file or directory");
    expect_fail(g_dir, m, "not a regular file (a folder)");
    path_in(p, sizeof p, "no/such/dir/x.safetensors");
    CHECK(rp_safetensors_save(p, m) == RP_ERR_IO && strstr(rp_last_error(), "x.safetensors: No such file"),
          "%s", rp_last_error());
    CHECK_STATUS(rp_safetensors_save("", m), RP_ERR_ARG, "safetensors path is empty");
    CHECK_STATUS(rp_safetensors_save(p, NULL), RP_ERR_ARG, "no model to save");
    CHECK_STATUS(rp_safetensors_load(NULL, &out), RP_ERR_ARG, "safetensors path is empty");
    CHECK_STATUS(rp_safetensors_load(p, NULL), RP_ERR_ARG, "no model pointer");
    CHECK_STATUS(rp_safetensors_load_into(p, NULL), RP_ERR_ARG, "no model to load into");
    unsigned char head[16] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    CHECK(rp_safetensors_magic(head, 10) && !rp_safetensors_magic(head, 8) &&
              rp_npy_magic("\x93NUM", 4) && !rp_npy_magic("", 0) && rp_checkpoint_magic("RP", 2) &&
              !rp_checkpoint_magic("RPCX", 4),
          "the magic tests");
    head[0] = 1;
    CHECK(!rp_safetensors_magic(head, 10), "a header length below 2 is no safetensors file");
    rp_model_free(m);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/rp_st_test.XXXXXX");
    if (!mkdtemp(g_dir)) {
        printf("FATAL: mkdtemp: %s\n", strerror(errno));
        return 2;
    }
    test_json();
    test_config_json();
    test_round_trips();
    test_pytorch_files();
    test_structure();
    test_against_model();
    test_positions();
    test_files_and_args();
    CHECK(rmdir(g_dir) == 0, "removed %s (empty): %s", g_dir, strerror(errno));
    return check_summary("test_safetensors");
}
