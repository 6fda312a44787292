/* The model config as the JSON object a safetensors file carries under "roper.config"
 * (core/safetensors.h): rp.model's keys and names, so that a Python reader sees what a Lua user
 * writes, and numbers that read back exactly (the shortest "%.*g" that strtod maps back). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "safetensors.h"

/* The shortest %.{15,16,17}g form of x that reads back as x. */
static const char *num_str(char *buf, size_t n, double x)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

/* The keys of the placement ablation and the relative modes, after the others, only where the
 * config uses them (so a config of the earlier keys reads as before). */
static int extra_json(const rp_model_cfg *c, char *buf, size_t n)
{
    char num[32], name[5];
    size_t k = 0;
    if (n) buf[0] = '\0';
#define PUT(...)                                                                                    \
    do {                                                                                            \
        int w_ = snprintf(buf + (k < n ? k : n), k < n ? n - k : 0, __VA_ARGS__);                   \
        if (w_ < 0) return -1;                                                                      \
        k += (size_t)w_;                                                                            \
    } while (0)
    if (c->rotate) PUT(",\"rotate\":\"%s\"", rp_rotate_name(c->rotate, name));
    const char *fk[3] = {"fraction_q", "fraction_k", "fraction_o"};
    double fv[3] = {c->fraction_q, c->fraction_k, c->fraction_o};
    for (int i = 0; i < 3; i++)
        if (fv[i] != 0.0) PUT(",\"%s\":%s", fk[i], num_str(num, sizeof num, fv[i]));
    rp_rel_kind rel = rp_pe_mode_of(c->pe) ? rp_pe_mode_of(c->pe)->rel : RP_REL_NONE;
    if (rel == RP_REL_SHAW || rel == RP_REL_DEBERTA) PUT(",\"rel_clip\":%lld", (long long)c->rel_clip);
    if (rel == RP_REL_T5)
        PUT(",\"rel_buckets\":%lld,\"rel_max_distance\":%lld", (long long)c->rel_buckets,
            (long long)c->rel_max_distance);
    rp_model_cfg d = rp_model_cfg_default(1);
    if (c->scaling != RP_SCALING_NONE)
        PUT(",\"scaling\":\"%s\",\"scaling_factor\":%s", rp_scaling_names[c->scaling],
            num_str(num, sizeof num, c->scaling_factor));
    if (c->orig_len) PUT(",\"orig_len\":%lld", (long long)c->orig_len);
    const char *yk[4] = {"yarn_alpha", "yarn_beta", "xpos", "xpos_scale_base"};
    double yv[4] = {c->yarn_alpha, c->yarn_beta, c->xpos, c->xpos_scale_base};
    double yd[4] = {d.yarn_alpha, d.yarn_beta, d.xpos, d.xpos_scale_base};
    for (int i = 0; i < 4; i++)
        if (yv[i] != yd[i]) PUT(",\"%s\":%s", yk[i], num_str(num, sizeof num, yv[i]));
#undef PUT
    return (int)k;
}

size_t rp_model_cfg_to_json(const rp_model_cfg *c, char *buf, size_t n)
{
    char d[32], fq[32], fv[32], base[32], extra[640];
    if (extra_json(c, extra, sizeof extra) < 0) return 0;
    int k = snprintf(buf, n,
                     "{\"vocab\":%lld,\"d_model\":%lld,\"heads\":%lld,\"layers\":%lld,"
                     "\"d_ff\":%lld,\"seq_len\":%lld,\"max_batch\":%lld,\"norm\":\"%s\","
                     "\"activation\":\"%s\",\"dropout\":%s,\"pe\":\"%s\",\"fraction_qk\":%s,"
                     "\"fraction_v\":%s,\"base\":%s,\"pairing\":\"%s\",\"seed\":%llu,"
                     "\"attention\":\"%s\",\"linear_rope\":\"%s\"%s}",
                     (long long)c->vocab, (long long)c->d_model, (long long)c->heads,
                     (long long)c->layers, (long long)c->d_ff, (long long)c->seq_len,
                     (long long)c->max_batch, rp_norm_names[c->norm], rp_act_names[c->act],
                     num_str(d, sizeof d, c->dropout), rp_pe_name(c->pe),
                     num_str(fq, sizeof fq, c->fraction_qk), num_str(fv, sizeof fv, c->fraction_v),
                     num_str(base, sizeof base, c->rope_base), rp_pairing_names[c->pairing],
                     (unsigned long long)c->seed, rp_attn_names[c->attention],
                     rp_lin_placement_name(c->linear_rope), extra);
    return k < 0 ? 0 : (size_t)k;
}

enum { K_INT, K_NUM, K_ENUM, K_SEED, K_ROTATE };

typedef struct {
    const char *key;
    int kind;
    int required;
} cfg_key;

static const cfg_key keys[] = {
    {"vocab", K_INT, 1},        {"d_model", K_INT, 1},      {"heads", K_INT, 1},
    {"layers", K_INT, 1},       {"d_ff", K_INT, 1},         {"seq_len", K_INT, 1},
    {"max_batch", K_INT, 0},    {"norm", K_ENUM, 1},        {"activation", K_ENUM, 1},
    {"dropout", K_NUM, 0},      {"pe", K_ENUM, 1},          {"fraction_qk", K_NUM, 1},
    {"fraction_v", K_NUM, 1},   {"base", K_NUM, 1},         {"pairing", K_ENUM, 1},
    {"seed", K_SEED, 0},        {"attention", K_ENUM, 1},   {"linear_rope", K_ENUM, 1},
    {"rotate", K_ROTATE, 0},    {"fraction_q", K_NUM, 0},   {"fraction_k", K_NUM, 0},
    {"fraction_o", K_NUM, 0},   {"rel_clip", K_INT, 0},     {"rel_buckets", K_INT, 0},
    {"rel_max_distance", K_INT, 0},
    {"scaling", K_ENUM, 0},     {"scaling_factor", K_NUM, 0}, {"orig_len", K_INT, 0},
    {"yarn_alpha", K_NUM, 0},   {"yarn_beta", K_NUM, 0},    {"xpos", K_NUM, 0},
    {"xpos_scale_base", K_NUM, 0},
};
#define NKEYS (sizeof keys / sizeof keys[0])

/* The names of an enum key (lin: room for linear_rope's, which core keeps behind functions). */
static const char *const *enum_names(const char *key, const char *lin[3])
{
    if (strcmp(key, "norm") == 0) return rp_norm_names;
    if (strcmp(key, "activation") == 0) return rp_act_names;
    if (strcmp(key, "pe") == 0) return rp_pe_names;
    if (strcmp(key, "pairing") == 0) return rp_pairing_names;
    if (strcmp(key, "attention") == 0) return rp_attn_names;
    if (strcmp(key, "scaling") == 0) return rp_scaling_names;
    lin[0] = rp_lin_placement_name(RP_LIN_AFTER);
    lin[1] = rp_lin_placement_name(RP_LIN_BEFORE);
    lin[2] = NULL;
    return lin;
}

/* The value of one key into cfg. */
static rp_status read_key(const rp_json_doc *doc, size_t v, const cfg_key *k, rp_model_cfg *c)
{
    const rp_json_node *x = &doc->nodes[v];
    if (k->kind == K_ROTATE) {
        int mask = -1;
        char pr[80];
        if (x->type == RP_JSON_STRING && strlen(doc->strings + x->str) == x->str_len)
            mask = rp_rotate_from_name(doc->strings + x->str);
        if (mask > 0) {
            c->rotate = mask;
            return RP_OK;
        }
        if (x->type != RP_JSON_STRING)
            return rp_error(RP_ERR_ARG, "'rotate' must be a string of distinct letters of qkvo, "
                                        "got %s", rp_json_type_name(x->type));
        return rp_error(RP_ERR_ARG, "'rotate' must be a string of distinct letters of qkvo, got "
                                    "\"%s\"",
                        rp_json_printable(pr, sizeof pr, doc->strings + x->str, x->str_len));
    }
    if (k->kind == K_ENUM) {
        const char *lin[3];
        const char *const *names = enum_names(k->key, lin);
        if (x->type == RP_JSON_STRING)
            for (int i = 0; names[i]; i++)
                if (strlen(names[i]) == x->str_len &&
                    strcmp(names[i], doc->strings + x->str) == 0) {
                    const char *key = k->key;
                    if (strcmp(key, "norm") == 0) c->norm = (rp_norm)i;
                    else if (strcmp(key, "activation") == 0) c->act = (rp_act)i;
                    else if (strcmp(key, "pe") == 0) c->pe = (rp_pe)i;
                    else if (strcmp(key, "pairing") == 0) c->pairing = (rp_pairing)i;
                    else if (strcmp(key, "attention") == 0) c->attention = (rp_attn_kind)i;
                    else if (strcmp(key, "scaling") == 0) c->scaling = (rp_rope_scaling)i;
                    else c->linear_rope = (rp_lin_placement)i;
                    return RP_OK;
                }
        char list[128] = "", got[96], pr[80];
        for (int i = 0; names[i]; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, names[i], sizeof list - strlen(list) - 1);
        }
        if (x->type == RP_JSON_STRING)
            snprintf(got, sizeof got, "\"%s\"",
                     rp_json_printable(pr, sizeof pr, doc->strings + x->str, x->str_len));
        else
            snprintf(got, sizeof got, "%s", rp_json_type_name(x->type));
        return rp_error(RP_ERR_ARG, "'%s' must be one of %s; got %s", k->key, list, got);
    }
    if (x->type != RP_JSON_NUMBER)
        return rp_error(RP_ERR_ARG, "'%s' must be %s, got %s", k->key,
                        k->kind == K_NUM ? "a number" : "an integer", rp_json_type_name(x->type));
    rp_status st;
    char msg[256];
    if (k->kind == K_NUM) {
        double d = 0.0;
        st = rp_json_double(doc, v, &d);
        if (st == RP_OK) {
            if (strcmp(k->key, "dropout") == 0) c->dropout = d;
            else if (strcmp(k->key, "fraction_qk") == 0) c->fraction_qk = d;
            else if (strcmp(k->key, "fraction_v") == 0) c->fraction_v = d;
            else if (strcmp(k->key, "fraction_q") == 0) c->fraction_q = d;
            else if (strcmp(k->key, "fraction_k") == 0) c->fraction_k = d;
            else if (strcmp(k->key, "fraction_o") == 0) c->fraction_o = d;
            else if (strcmp(k->key, "scaling_factor") == 0) c->scaling_factor = d;
            else if (strcmp(k->key, "yarn_alpha") == 0) c->yarn_alpha = d;
            else if (strcmp(k->key, "yarn_beta") == 0) c->yarn_beta = d;
            else if (strcmp(k->key, "xpos") == 0) c->xpos = d;
            else if (strcmp(k->key, "xpos_scale_base") == 0) c->xpos_scale_base = d;
            else c->rope_base = d;
        }
    } else if (k->kind == K_SEED) {
        uint64_t u = 0;
        int64_t i = 0;
        st = rp_json_u64(doc, v, &u);
        if (st != RP_OK && (st = rp_json_i64(doc, v, &i)) == RP_OK) u = (uint64_t)i;
        if (st == RP_OK) c->seed = u;
    } else {
        int64_t i = 0;
        st = rp_json_i64(doc, v, &i);
        if (st == RP_OK) {
            const char *key = k->key;
            if (strcmp(key, "vocab") == 0) c->vocab = i;
            else if (strcmp(key, "d_model") == 0) c->d_model = i;
            else if (strcmp(key, "heads") == 0) c->heads = i;
            else if (strcmp(key, "layers") == 0) c->layers = i;
            else if (strcmp(key, "d_ff") == 0) c->d_ff = i;
            else if (strcmp(key, "seq_len") == 0) c->seq_len = i;
            else if (strcmp(key, "rel_clip") == 0) c->rel_clip = i;
            else if (strcmp(key, "rel_buckets") == 0) c->rel_buckets = i;
            else if (strcmp(key, "rel_max_distance") == 0) c->rel_max_distance = i;
            else if (strcmp(key, "orig_len") == 0) c->orig_len = i;
            else c->max_batch = i;
        }
    }
    if (st == RP_OK) return RP_OK;
    snprintf(msg, sizeof msg, "%s", rp_last_error());
    return rp_error(RP_ERR_ARG, "'%s': %s", k->key, msg);
}

rp_status rp_model_cfg_from_json(const char *text, size_t len, rp_model_cfg *cfg)
{
    if (!cfg || (!text && len))
        return rp_error(RP_ERR_ARG, "rp_model_cfg_from_json: NULL argument");
    rp_json_doc doc;
    rp_status st = rp_json_parse(&doc, text, len, 4096);
    if (st != RP_OK) {
        rp_json_free(&doc);
        return st;
    }
    rp_model_cfg c = rp_model_cfg_default(0);
    int seen[NKEYS] = {0};
    if (doc.nodes[0].type != RP_JSON_OBJECT) {
        st = rp_error(RP_ERR_ARG, "not a JSON object (%s)", rp_json_type_name(doc.nodes[0].type));
        goto done;
    }
    for (size_t m = doc.nodes[0].first; m != RP_JSON_NONE; m = doc.nodes[m].next) {
        const char *key = doc.strings + doc.nodes[m].key;
        size_t k = 0;
        while (k < NKEYS && !(strlen(keys[k].key) == doc.nodes[m].key_len &&
                              strcmp(keys[k].key, key) == 0))
            k++;
        if (k == NKEYS) {
            char buf[256];
            st = rp_error(RP_ERR_ARG, "unknown key '%s'",
                          rp_json_printable(buf, sizeof buf, key, doc.nodes[m].key_len));
            goto done;
        }
        seen[k] = 1;
        if ((st = read_key(&doc, m, &keys[k], &c)) != RP_OK) goto done;
    }
    for (size_t k = 0; k < NKEYS; k++)
        if (keys[k].required && !seen[k]) {
            st = rp_error(RP_ERR_ARG, "no key '%s'", keys[k].key);
            goto done;
        }
    *cfg = c;
done:
    rp_json_free(&doc);
    return st;
}
